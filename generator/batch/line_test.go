package batch

import (
	"errors"

	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/wire"

	"github.com/synthgen/synthgen/sink"
)

func keyOf(id string, sample int) sink.Key { return sink.Key{ID: id, Sample: sample} }

// TestReadLines: OpenAI's output and error lines become an answer or the
// reason there is none; a line that is not one names its file and line.
func TestReadLines(t *testing.T) {
	in := `{"id":"batch_req_1","custom_id":"0.1.a","response":{"status_code":200,"request_id":"r1","body":{"choices":[]}},"error":null}
{"id":"batch_req_2","custom_id":"0.1.b","response":{"status_code":500,"request_id":"r2","body":{"error":{"message":"boom"}}},"error":null}
{"id":"batch_req_3","custom_id":"0.1.c","response":null,"error":{"code":"batch_expired","message":"This request could not be executed before the completion window expired."}}

{"id":"batch_req_4","custom_id":"0.1.d"}
`
	got := map[string]answer{}
	if err := readLines(strings.NewReader(in), "out.jsonl", func(cid string, a answer) { got[cid] = a }, nil); err != nil {
		t.Fatal(err)
	}
	if a := got["0.1.a"]; a.fail != "" || string(a.body) != `{"choices":[]}` {
		t.Errorf("a: %+v", a)
	}
	if a := got["0.1.b"]; a.body != nil || !strings.Contains(a.fail, "status 500") || !strings.Contains(a.fail, "boom") {
		t.Errorf("b: %+v", a)
	}
	if a := got["0.1.c"]; !strings.HasPrefix(a.fail, "batch_expired: ") {
		t.Errorf("c: %+v", a)
	}
	if a := got["0.1.d"]; a.fail == "" {
		t.Errorf("d: %+v, want a failure", a)
	}
}

// TestReadLinesBadLines: a malformed line costs that line only, named by
// file and line; the lines after it are read, and a bad line whose
// custom_id can be read fails that request, naming the line.
func TestReadLinesBadLines(t *testing.T) {
	in := `{"custom_id":"0.1.a","response":{"status_code":200,"body":{}}}
not json
{"custom_id":"0.1.b","response":{"status_code":200,"bo
{"id":"r"}
{"custom_id":"0.1.c","response":{"status_code":200,"body":{}}}
{"custom_id":7}
`
	got := map[string]answer{}
	var bad []string
	err := readLines(strings.NewReader(in), "out.jsonl", func(cid string, a answer) { got[cid] = a },
		func(err error) { bad = append(bad, err.Error()) })
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"out.jsonl:2: ", "out.jsonl:3: ", "out.jsonl:4: malformed line: not a batch output line: custom_id: missing", "out.jsonl:6: "}
	if len(bad) != len(want) {
		t.Fatalf("bad lines %q, want %d of them", bad, len(want))
	}
	for i, w := range want {
		if !strings.HasPrefix(bad[i], w) {
			t.Errorf("bad line %d: %q, want it to start %q", i, bad[i], w)
		}
	}
	if a := got["0.1.a"]; a.body == nil || a.where != "out.jsonl:1" {
		t.Errorf("a: %+v", a)
	}
	if a := got["0.1.c"]; a.body == nil || a.where != "out.jsonl:5" {
		t.Errorf("c, after the bad lines: %+v", a)
	}
	if a := got["0.1.b"]; a.body != nil || !strings.HasPrefix(a.fail, "out.jsonl:3: ") {
		t.Errorf("b, a truncated line: %+v, want a failure naming out.jsonl:3", a)
	}
	if len(got) != 3 {
		t.Errorf("answers %v, want a, b and c", got)
	}
}

// FuzzReadLines: whatever a server's output file holds, reading it
// returns an error or answers, never panics, and every answer is a body
// or a reason.
func FuzzReadLines(f *testing.F) {
	f.Add(`{"custom_id":"a","response":{"status_code":200,"body":{}}}` + "\n")
	f.Add(`{"custom_id":"a","error":{"code":"x","message":"y"}}`)
	f.Add("\n\n{")
	f.Fuzz(func(t *testing.T, s string) {
		_ = readLines(strings.NewReader(s), "f", func(cid string, a answer) {
			if cid == "" || (a.fail == "") == (a.body == nil) || a.where == "" {
				t.Fatalf("custom_id %q answer %+v: neither or both of a body and a failure, or no line named", cid, a)
			}
		}, func(err error) {
			if !strings.HasPrefix(err.Error(), "f:") {
				t.Fatalf("bad line %v: names no file and line", err)
			}
		})
	})
}

// TestCustomID: the turns of one key and its samples are distinct lines.
func TestCustomID(t *testing.T) {
	ids := map[string]bool{}
	for _, k := range []struct {
		id           string
		sample, turn int
	}{{"a", 0, 1}, {"a", 1, 1}, {"a", 0, 3}, {"1.a", 0, 1}} {
		ids[customID(keyOf(k.id, k.sample), k.turn)] = true
	}
	if len(ids) != 4 {
		t.Errorf("%d distinct custom_ids of 4 requests: %v", len(ids), ids)
	}
}

// TestTooLongLineIsTooLong: a line the server refused because the prompt
// does not fit the model's context (a 400 with vLLM's words, or an error
// object saying so) is cause too_long, as the streaming path has it, and
// not batch; any other failed line stays batch.
func TestTooLongLineIsTooLong(t *testing.T) {
	in := `{"custom_id":"0.1.a","response":{"status_code":400,"body":{"error":{"message":"This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion).","type":"BadRequestError"}}}}
{"custom_id":"0.1.b","response":null,"error":{"code":"context_length_exceeded","message":"The decoder prompt (length 5000) is longer than the maximum model length of 4096."}}
{"custom_id":"0.1.c","response":{"status_code":400,"body":{"error":{"message":"bad temperature"}}}}
{"custom_id":"0.1.d","response":{"status_code":500,"body":{"error":{"message":"maximum context length is 4096 tokens"}}}}
`
	got := map[string]answer{}
	if err := readLines(strings.NewReader(in), "out.jsonl", func(cid string, a answer) { got[cid] = a }, nil); err != nil {
		t.Fatal(err)
	}
	for cid, want := range map[string]string{"0.1.a": wire.CauseTooLong, "0.1.b": wire.CauseTooLong, "0.1.c": wire.CauseBatch, "0.1.d": wire.CauseBatch} {
		_, err := got[cid].response()
		var e *wire.Error
		if !errors.As(err, &e) || e.Cause != want {
			t.Errorf("%s: %v, want cause %s", cid, err, want)
			continue
		}
		if want == wire.CauseTooLong && (e.Retryable || !strings.Contains(e.Message, "context")) {
			t.Errorf("%s: %+v: retryable, or its message lost", cid, e)
		}
	}
	if _, err := got["0.1.a"].response(); !strings.Contains(err.Error(), "max_model_len 4096") && !strings.Contains(err.Error(), "4096") {
		t.Errorf("0.1.a: %v, want the sizes", err)
	}
}
