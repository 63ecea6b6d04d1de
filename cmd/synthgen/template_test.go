package main

// prompt.messages end to end: what the server receives for a dataset of
// its own columns, the bad row, the template in the job.

import (
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

// qaRows is a dataset of its own columns; row 3 (line 3) has no context.
var qaRows = []map[string]any{
	{"question": "What is 2+2?", "context": "Arithmetic, base ten.", "lang": "English"},
	{"question": "Quelle est la capitale ?", "context": "La France.\nUn pays.", "lang": "French"},
	{"question": "Where is the context?", "lang": "German"},
	{"question": `quote "this" & <that> ✓`, "context": "  spaced  ", "lang": "Spanish"},
	{"question": "last", "context": "c", "lang": "Italian", "extra": []any{1, 2}},
}

const qaConfig = `prompt:
  messages:
    - role: system
      content: "You answer in {{.lang}}."
    - role: user
      content: |
        Context: {{.context}}
        Question: {{.question}}
`

// qaRendered is what the template makes of a row.
func qaRendered(r map[string]any) []map[string]any {
	return []map[string]any{
		{"role": "system", "content": fmt.Sprintf("You answer in %s.", r["lang"])},
		{"role": "user", "content": fmt.Sprintf("Context: %s\nQuestion: %s\n", r["context"], r["question"])},
	}
}

func writeJSONL(t *testing.T, path string, rows []map[string]any) string {
	t.Helper()
	var b strings.Builder
	for _, r := range rows {
		line, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "job.yaml")
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestRunRendersTemplate: every row of a dataset with columns question,
// context and lang reaches the server as exactly the two rendered turns;
// the row without context is a bad row naming its line and the field, and
// the server never hears of it.
func TestRunRendersTemplate(t *testing.T) {
	clearSynthgenEnv(t)
	srv := &recordingServer{}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	data := writeJSONL(t, filepath.Join(t.TempDir(), "qa.jsonl"), qaRows)
	cj := cliJob{baseURL: ts.URL + "/v1", data: data, dir: filepath.Join(t.TempDir(), "out")}
	r := cliRun(t, cj.args("--config", writeConfig(t, qaConfig))...)
	r.ok(t, "run")

	want := map[string][]map[string]any{} // by question
	for i, row := range qaRows {
		if i != 2 {
			want[row["question"].(string)] = qaRendered(row)
		}
	}
	bodies := srv.requests()
	if len(bodies) != len(want) {
		t.Errorf("the server got %d requests, want %d (one per good row)", len(bodies), len(want))
	}
	for _, raw := range bodies {
		var body struct {
			Messages []map[string]any `json:"messages"`
		}
		if err := json.Unmarshal(raw, &body); err != nil {
			t.Fatal(err)
		}
		if len(body.Messages) != 2 {
			t.Errorf("request %s: want two turns", raw)
			continue
		}
		user := body.Messages[1]["content"].(string)
		q := user[strings.LastIndex(user, "Question: ")+len("Question: ") : len(user)-1]
		if w, ok := want[q]; !ok || !reflect.DeepEqual(body.Messages, w) {
			t.Errorf("the server got %q\nwant %q", body.Messages, w)
		}
		delete(want, q)
		if strings.Contains(string(raw), "<no value>") {
			t.Errorf("sent a null: %s", raw)
		}
	}
	if len(want) > 0 {
		t.Errorf("never asked: %v", want)
	}
	if !strings.Contains(r.stderr, "skip row "+data+":3: context: missing (read by prompt.messages[2]") {
		t.Errorf("stderr does not name line 3 and context:\n%s", r.stderr)
	}
	inv, err := readInventory(cj.dir)
	if err != nil {
		t.Fatal(err)
	}
	if len(inv.Records) != 4 {
		t.Errorf("%d records, want the 4 good rows'", len(inv.Records))
	}
	for i, row := range qaRows {
		rec, ok := inv.Records[sink.Key{ID: strconv.Itoa(i)}]
		if i == 2 {
			if ok {
				t.Errorf("the bad row has a record: %+v", rec)
			}
			continue
		}
		var got []map[string]any
		for _, m := range rec.Messages {
			got = append(got, map[string]any{"role": m.Role, "content": m.Content})
		}
		if !reflect.DeepEqual(got, qaRendered(row)) {
			t.Errorf("record %d: messages %q, want what was sent, %q", i, got, qaRendered(row))
		}
	}

	// The template is the job's: inspect shows it, and a resume with
	// another one is refused naming the key, before any request.
	in := cliRun(t, "inspect", cj.dir)
	in.ok(t, "inspect")
	for _, w := range []string{"prompt.messages (rendered over each row's fields):", `[1] system: "You answer in {{.lang}}."`, `[2] user: "Context: {{.context}}\nQuestion: {{.question}}\n"`} {
		if !strings.Contains(in.stdout, w) {
			t.Errorf("inspect does not show %s:\n%s", w, in.stdout)
		}
	}
	before := len(srv.requests())
	changed := strings.Replace(qaConfig, "You answer in", "Answer in", 1)
	r = cliRun(t, cj.args("--config", writeConfig(t, changed))...)
	if exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), "prompt.messages: ") || !strings.Contains(r.err.Error(), "(on disk) -> ") {
		t.Errorf("resume with another template: exit %d, %v", exitCode(r.err), r.err)
	}
	if n := len(srv.requests()); n != before {
		t.Errorf("a refused resume sent %d requests", n-before)
	}
	// The same template resumes: nothing left to ask.
	cliRun(t, cj.args("--config", writeConfig(t, qaConfig))...).ok(t, "resume")
	if n := len(srv.requests()); n != before {
		t.Errorf("a resume of a done job sent %d requests", n-before)
	}
}

// TestRunRefusesTemplateThatDoesNotParse: at start, exit 2, with the file
// and line of the key and the line and column in the template; nothing is
// sent.
func TestRunRefusesTemplateThatDoesNotParse(t *testing.T) {
	clearSynthgenEnv(t)
	srv := &recordingServer{}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	data := writeJSONL(t, filepath.Join(t.TempDir(), "qa.jsonl"), qaRows)
	cj := cliJob{baseURL: ts.URL + "/v1", data: data, dir: filepath.Join(t.TempDir(), "out")}
	config := writeConfig(t, strings.Replace(qaConfig, "Question: {{.question}}", "Question: {{.question | upper}}", 1))
	r := cliRun(t, cj.args("--config", config)...)
	want := config + `:2: prompt.messages[2] (user).content: line 2, col 25: function "upper" not defined`
	if exitCode(r.err) != exitUsage || !strings.Contains(r.err.Error(), want) {
		t.Errorf("exit %d, %v\nwant %s", exitCode(r.err), r.err, want)
	}
	if n := len(srv.requests()); n > 0 {
		t.Errorf("%d requests sent", n)
	}
	if _, err := os.Stat(cj.dir); err == nil {
		t.Errorf("the output directory was made")
	}
}

// TestRunRefusesTemplateThatFailsEveryRow: a template call that is not
// defined, or a helper's constant argument it cannot take, made every row
// bad and the run "done 0/0", exit 0; it is refused at start, exit 2, with
// the key and the place in the template, and nothing is sent.
func TestRunRefusesTemplateThatFailsEveryRow(t *testing.T) {
	clearSynthgenEnv(t)
	srv := &recordingServer{}
	ts := httptest.NewServer(srv)
	t.Cleanup(ts.Close)
	data := writeJSONL(t, filepath.Join(t.TempDir(), "qa.jsonl"), qaRows)
	for _, tt := range []struct{ content, want string }{
		{`{{template \"nope\"}}`, `prompt.messages[1] (user).content: line 1, col 12: template "nope" is not defined`},
		{`{{.question | truncate -1}}`, `prompt.messages[1] (user).content: line 1, col 24: truncate -1: the length must not be negative`},
	} {
		cj := cliJob{baseURL: ts.URL + "/v1", data: data, dir: filepath.Join(t.TempDir(), "out")}
		r := cliRun(t, cj.args("--prompt.messages", `[{"role":"user","content":"`+tt.content+`"}]`)...)
		if exitCode(r.err) != exitUsage || r.err == nil || !strings.Contains(r.err.Error(), tt.want) {
			t.Errorf("%s: exit %d, %v\nwant %s", tt.content, exitCode(r.err), r.err, tt.want)
		}
	}
	if n := len(srv.requests()); n > 0 {
		t.Errorf("%d requests sent", n)
	}
}
