package main

// An OpenAI batch input file is answered as it says: `synthgen run` against
// a server that records every request body, with rows that carry their own
// temperature (0 among them) and max_tokens and rows that carry none. The
// checks read only the files, the command line and the HTTP bodies.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// batchRow is one line of the batch file and what its request must carry.
type batchRow struct {
	id   string
	msgs []map[string]string // as sent
	raw  map[string]string   // the row's own fields as written in the file
}

// batchRows writes n request rows in the shapes a batch file mixes: its own
// temperature (0, 0.0, 1.10) and max_tokens, max_completion_tokens, a seed
// and top_k, or none of them; content as a string or as text parts; a
// system turn; body fields that are not sent (model, stream, n 1).
func batchRows(t *testing.T, n int) (path string, rows []batchRow) {
	t.Helper()
	var b bytes.Buffer
	for i := range n {
		r := batchRow{id: fmt.Sprintf("req-%03d", i), raw: map[string]string{}}
		user := fmt.Sprintf("batch prompt %d", i)
		turns := []any{}
		if i%4 == 1 {
			turns = append(turns, map[string]any{"role": "system", "content": "row system " + r.id})
			r.msgs = append(r.msgs, map[string]string{"role": "system", "content": "row system " + r.id})
		}
		if i%6 == 2 {
			turns = append(turns, map[string]any{"role": "user", "content": []any{
				map[string]any{"type": "text", "text": user},
			}})
		} else {
			turns = append(turns, map[string]any{"role": "user", "content": user})
		}
		r.msgs = append(r.msgs, map[string]string{"role": "user", "content": user})
		// The fields are written by hand below, so that the test knows the
		// bytes of each number as the file holds them.
		var fields []string
		add := func(k, v string) {
			fields = append(fields, fmt.Sprintf("%q:%s", k, v))
			r.raw[k] = v
		}
		switch i % 5 {
		case 0:
			add("temperature", "0")
			add("max_tokens", fmt.Sprint(10+i))
		case 1:
			add("temperature", "1.10")
			add("max_tokens", fmt.Sprint(1000+i))
			add("seed", fmt.Sprint(i))
		case 2: // nothing of its own: the config's values
		case 3:
			add("temperature", "0.0")
			add("max_completion_tokens", fmt.Sprint(2000+i))
			add("top_k", "-1")
		case 4:
			add("max_tokens", "1")
		}
		if i%3 == 0 {
			fields = append(fields, `"model":"gpt-4o-mini"`)
		}
		if i%7 == 0 {
			fields = append(fields, `"stream":false`, `"n":1`)
		}
		msgs, err := json.Marshal(turns)
		if err != nil {
			t.Fatal(err)
		}
		fields = append(fields, `"messages":`+string(msgs))
		fmt.Fprintf(&b, `{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{%s}}`+"\n", r.id, strings.Join(fields, ","))
		rows = append(rows, r)
	}
	// A repeated custom_id is asked once, by its first line: the repeat is a
	// bad row.
	b.WriteString(`{"custom_id":"req-005","method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"a second req-005"}]}}` + "\n")
	path = filepath.Join(t.TempDir(), "batch.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, rows
}

// TestRunAnswersAnOpenAIBatchFile: every custom_id is asked exactly once,
// with the row's own temperature and max_tokens where it has them and the
// config's where it has none; the records hold what was sent; a resume asks
// nothing. A repeated custom_id is asked once: the repeat is a bad row.
func TestRunAnswersAnOpenAIBatchFile(t *testing.T) {
	// Not parallel: clearSynthgenEnv sets the environment (t.Setenv), as
	// soon as any SYNTHGEN_ variable is set (.ci/run sets one).
	clearSynthgenEnv(t)
	for _, format := range []string{"openai-batch", "auto"} {
		t.Run(format, func(t *testing.T) {
			const n = 120 // each row shape (i mod 3, 4, 5, 6, 7) twice or more
			data, rows := batchRows(t, n)
			srv := &recordingServer{}
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			dir := filepath.Join(t.TempDir(), "out")
			args := []string{"run", "--quiet",
				"--endpoint.base_url=" + ts.URL + "/v1", "--endpoint.model=org/Model-B",
				"--dataset.path=" + data, "--dataset.format=" + format, "--dataset.on_bad_row=skip",
				"--output.dir=" + dir, "--output.format=jsonl", "--output.shard_size=64", "--concurrency=8",
				"--generation.temperature=0.6", "--generation.max_tokens=512", "--generation.top_p=0.95",
				"--generation.stream=true", `--generation.extra_body={"top_k": 20}`,
			}
			res := cliRun(t, args...)
			res.ok(t, "run")
			// The one bad row is the repeat: every shape above makes a request.
			if c := strings.Count(res.stderr, "skip row "); c != 1 ||
				!strings.Contains(res.stderr, fmt.Sprintf("skip row %s:%d: custom_id: repeats the id \"req-005\" of %s:6", data, n+1, data)) {
				t.Errorf("stderr should name the repeated custom_id as the one bad row (%d skipped):\n%s", c, res.stderr)
			}
			if c := strings.Count(res.stderr, "ask for model"); c != 1 || !strings.Contains(res.stderr, `model "gpt-4o-mini"`) {
				t.Errorf("stderr should note body.model once:\n%s", res.stderr)
			}
			if c := strings.Count(res.stderr, "sets body.stream, which is not sent"); c != 1 {
				t.Errorf("stderr should note body.stream once (%d times):\n%s", c, res.stderr)
			}

			byPrompt := map[string]batchRow{}
			for _, r := range rows {
				byPrompt[r.msgs[len(r.msgs)-1]["content"]] = r
			}
			config := map[string]string{"temperature": "0.6", "max_tokens": "512", "top_p": "0.95", "top_k": "20"}
			asked := map[string]int{}
			for i, raw := range srv.requests() {
				var body map[string]json.RawMessage
				if err := json.Unmarshal(raw, &body); err != nil {
					t.Fatalf("request %d: %v: %s", i, err, raw)
				}
				var msgs []map[string]string
				if err := json.Unmarshal(body["messages"], &msgs); err != nil || len(msgs) == 0 {
					t.Fatalf("request %d: messages %s", i, body["messages"])
				}
				r, ok := byPrompt[msgs[len(msgs)-1]["content"]]
				if !ok {
					t.Fatalf("request %d asks a prompt not in the file: %s", i, raw)
				}
				asked[r.id]++
				fail := func(format string, args ...any) {
					t.Helper()
					t.Errorf("%s: "+format+"\nbody: %s", append([]any{r.id}, append(args, raw)...)...)
				}
				if !reflect.DeepEqual(msgs, r.msgs) {
					fail("messages %v, want the row's %v", msgs, r.msgs)
				}
				want := map[string]string{"model": `"org/Model-B"`, "stream": "true", "stream_options": `{"include_usage":true}`}
				for k, v := range config {
					want[k] = v
				}
				for k, v := range r.raw {
					want[k] = v
				}
				if _, ok := r.raw["max_completion_tokens"]; ok {
					delete(want, "max_tokens") // one setting: the row's spelling replaces the config's
				}
				for k, v := range want {
					if got, ok := body[k]; !ok || string(got) != v {
						fail("%s is %s, want %s", k, got, v)
					}
				}
				for k := range body {
					if _, ok := want[k]; !ok && k != "messages" {
						fail("unexpected key %q", k)
					}
				}
			}
			var ids []string
			for _, r := range rows {
				ids = append(ids, r.id)
			}
			wantIDs(t, "requests", asked, ids...)

			records := countJSONL(t, filepath.Join(dir, "data"), func(line []byte) (string, error) {
				var rec sink.Record
				if err := json.Unmarshal(line, &rec); err != nil {
					return "", err
				}
				r, ok := byPrompt[rec.Messages[len(rec.Messages)-1].Content]
				if !ok || r.id != rec.ID {
					return "", fmt.Errorf("record %s holds the prompt of %s", rec.ID, r.id)
				}
				var sent []map[string]string
				for _, m := range rec.Messages {
					sent = append(sent, map[string]string{"role": m.Role, "content": m.Content})
				}
				if !reflect.DeepEqual(sent, r.msgs) || rec.Sample != 0 || rec.FinishReason != "stop" {
					return "", fmt.Errorf("record %s: messages %v sample %d finish %q; want %v 0 stop", rec.ID, sent, rec.Sample, rec.FinishReason, r.msgs)
				}
				return rec.ID, nil
			})
			wantIDs(t, "records", records, ids...)

			// A resume finds every custom_id answered and asks nothing.
			before := len(srv.requests())
			cliRun(t, args...).ok(t, "resume")
			if after := len(srv.requests()); after != before {
				t.Errorf("the resume sent %d requests, want none", after-before)
			}
		})
	}
}

// TestRunParamsColumn: with dataset.params_field, a ShareGPT row's own
// request fields (the column's object) replace the config's for that row,
// as written (0 stays 0), and rows without the column take the config's.
func TestRunParamsColumn(t *testing.T) {
	clearSynthgenEnv(t)
	var b strings.Builder
	want := map[string]map[string]string{}
	for i := range 40 {
		q := fmt.Sprintf("question %d", i)
		row := map[string]any{"conversations": []map[string]string{{"from": "human", "value": q}}}
		w := map[string]string{"temperature": "0.6", "max_tokens": "512"}
		switch i % 3 {
		case 0:
			row["sampling"] = json.RawMessage(fmt.Sprintf(`{"temperature": 0, "max_tokens": %d, "seed": %d}`, 100+i, i))
			w = map[string]string{"temperature": "0", "max_tokens": strconv.Itoa(100 + i), "seed": strconv.Itoa(i)}
		case 1:
			row["sampling"] = json.RawMessage(`{"temperature": 1.10}`)
			w["temperature"] = "1.10"
		}
		want[q] = w
		line, err := json.Marshal(row)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(append(line, '\n'))
	}
	data := filepath.Join(t.TempDir(), "rows.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	srv := &recordingServer{}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	cliRun(t, "run", "--quiet", "--endpoint.base_url="+ts.URL+"/v1", "--endpoint.model=org/Model-B",
		"--dataset.path="+data, "--dataset.params_field=sampling", "--dataset.on_bad_row=fail",
		"--output.dir="+filepath.Join(t.TempDir(), "out"), "--output.format=jsonl", "--concurrency=4",
		"--generation.temperature=0.6", "--generation.max_tokens=512").ok(t, "run")
	reqs := srv.requests()
	if len(reqs) != 40 {
		t.Fatalf("%d requests, want 40", len(reqs))
	}
	for _, raw := range reqs {
		var body map[string]json.RawMessage
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		var msgs []map[string]string
		_ = json.Unmarshal(body["messages"], &msgs)
		w := want[msgs[len(msgs)-1]["content"]]
		for k, v := range w {
			if got := string(body[k]); got != v {
				t.Errorf("%s: %s is %s, want %s\nbody: %s", msgs[len(msgs)-1]["content"], k, got, v, raw)
			}
		}
		if _, ok := w["seed"]; !ok && body["seed"] != nil {
			t.Errorf("a row without its own seed sent one: %s", raw)
		}
	}
}
