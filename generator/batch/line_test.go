package batch

import (
	"strings"
	"testing"

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
	if err := readLines(strings.NewReader(in), "out.jsonl", func(cid string, a answer) { got[cid] = a }); err != nil {
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
	for _, bad := range []string{"{\"custom_id\":\"x\"}\nnot json\n", "{\"id\":\"r\"}\n"} {
		err := readLines(strings.NewReader(bad), "out.jsonl", func(string, answer) {})
		if err == nil || !strings.Contains(err.Error(), "out.jsonl:") {
			t.Errorf("%q: %v, want an error naming out.jsonl and the line", bad, err)
		}
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
			if cid == "" || (a.fail == "") == (a.body == nil) {
				t.Fatalf("custom_id %q answer %+v: neither or both of a body and a failure", cid, a)
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
