package dataset

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/chat"
)

// qaTemplate is the two-turn template of the judged case: a system turn
// naming the language, a user turn with the context and the question.
var qaTemplate = []chat.Message{
	{Role: "system", Content: "Answer in {{.lang}}."},
	{Role: "user", Content: "Context:\n{{.context}}\n\nQuestion: {{.question}}"},
}

// TestTemplateRendersEveryRow: rows of their own columns become exactly
// the rendered turns; a row without context is a bad row naming its line
// and the field, and nothing of it is sent.
func TestTemplateRendersEveryRow(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "qa.jsonl", strings.Join([]string{
		`{"question":"What is 2+2?","context":"Arithmetic.","lang":"English"}`,
		`{"question":"Capitale ?","context":"La France.","lang":"French","extra":[1,2]}`,
		`{"question":"No context here","lang":"German"}`,
		`{"question":"Null context","context":null,"lang":"German"}`,
		`{"question":"q5","context":"c5","lang":"Spanish"}`,
	}, "\n")+"\n")
	got, bad := readAll(t, Options{Selection: Selection{Path: path}, Template: qaTemplate})
	want := [][]chat.Message{
		{sy("Answer in English."), u("Context:\nArithmetic.\n\nQuestion: What is 2+2?")},
		{sy("Answer in French."), u("Context:\nLa France.\n\nQuestion: Capitale ?")},
		{sy("Answer in Spanish."), u("Context:\nc5\n\nQuestion: q5")},
	}
	if len(got) != len(want) {
		t.Fatalf("%d prompts, want %d: %+v", len(got), len(want), got)
	}
	for i := range want {
		if !reflect.DeepEqual(got[i].Messages, want[i]) {
			t.Errorf("row %d: %q, want %q", i, got[i].Messages, want[i])
		}
	}
	if ids := ids(got); !reflect.DeepEqual(ids, []string{"0", "1", "4"}) {
		t.Errorf("ids %v: a templated row's id is its index", ids)
	}
	if len(bad) != 2 {
		t.Fatalf("bad rows %v, want lines 3 and 4", bad)
	}
	for i, line := range []int64{3, 4} {
		e := bad[i]
		if e.File != path || e.Line != line || e.Field != "context" || !errors.Is(e.Err, ErrMissing) {
			t.Errorf("bad row %d: %+v, want %s:%d field context missing", i, e, path, line)
		}
		if msg := e.Error(); !strings.Contains(msg, "context: missing") || !strings.Contains(msg, "prompt.messages[2]") || strings.Contains(msg, "<no value>") {
			t.Errorf("message %q: want the field, the turn that reads it, and no %s", msg, "<no value>")
		}
	}
}

// renderOne renders one JSON row through a real file.
func renderOne(t *testing.T, tmpl []chat.Message, line string) ([]chat.Message, *RowError) {
	t.Helper()
	path := writeFile(t, t.TempDir(), "rows.jsonl", line+"\n")
	got, bad := readAll(t, Options{Selection: Selection{Path: path}, Template: tmpl})
	switch {
	case len(got) == 1 && len(bad) == 0:
		return got[0].Messages, nil
	case len(got) == 0 && len(bad) == 1:
		return nil, bad[0]
	}
	t.Fatalf("%d prompts, %d bad rows", len(got), len(bad))
	return nil, nil
}

func userTurn(content string) []chat.Message {
	return []chat.Message{{Role: "user", Content: content}}
}

func TestTemplateHelpers(t *testing.T) {
	tests := []struct {
		name, tmpl, row, want string
	}{
		{"nested field", "{{.meta.lang}}: {{.q}}", `{"q":"x","meta":{"lang":"fr"}}`, "fr: x"},
		{"number and bool", "{{.n}} {{.f}} {{.ok}}", `{"n":12345678901234567890,"f":1.5,"ok":true}`, "12345678901234567890 1.5 true"},
		{"json of a list of turns", "{{json .messages}}", `{"messages":[{"role":"user","content":"a<b & c"}]}`, `[{"content":"a<b & c","role":"user"}]`},
		{"json keeps numbers exact", "{{json .n}}", `{"n":12345678901234567890}`, "12345678901234567890"},
		{"trim", "[{{trim .q}}]", `{"q":"  padded \n"}`, "[padded]"},
		{"truncate by characters", "{{.q | truncate 3}}", `{"q":"héllo"}`, "hél"},
		{"truncate shorter text", "{{truncate 10 .q}}", `{"q":"hi"}`, "hi"},
		{"default for a missing field", `{{.lang | default "en"}} {{.q}}`, `{"q":"x"}`, "en x"},
		{"default for null", `{{default "en" .lang}}`, `{"lang":null}`, "en"},
		{"default for empty", `{{.lang | default "en"}}`, `{"lang":""}`, "en"},
		{"default keeps a value", `{{.lang | default "en"}}`, `{"lang":"de"}`, "de"},
		{"default of a nested field", `{{.meta.lang | default "en"}}`, `{"q":1}`, "en"},
		{"join", `{{.tags | join ", "}}`, `{"tags":["a","b",3]}`, "a, b, 3"},
		{"if on a missing field", `{{if .context}}C: {{.context}} {{end}}Q: {{.q}}`, `{"q":"x"}`, "Q: x"},
		{"if on a present field", `{{if .context}}C: {{.context}} {{end}}Q: {{.q}}`, `{"q":"x","context":"y"}`, "C: y Q: x"},
		{"with on a missing field", `{{with .context}}C: {{.}}{{else}}none{{end}}`, `{"q":"x"}`, "none"},
		{"range over turns", "{{range .messages}}{{.role}}: {{.content}}\n{{end}}", `{"messages":[{"role":"user","content":"hi"},{"role":"assistant","content":"yo"}]}`, "user: hi\nassistant: yo\n"},
		{"the row's own <no value> text", "{{.q}}", `{"q":"say <no value>"}`, "say <no value>"},
		{"root variable inside range", `{{range .items}}{{.}}{{$.sep | default "-"}}{{end}}`, `{"items":["a","b"]}`, "a-b-"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, bad := renderOne(t, userTurn(tt.tmpl), tt.row)
			if bad != nil {
				t.Fatalf("bad row: %v", bad)
			}
			if len(got) != 1 || got[0].Content != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

// TestTemplateBadRows: what a template cannot render is a bad row naming
// the field where there is one, and never reaches the server as text.
func TestTemplateBadRows(t *testing.T) {
	tests := []struct {
		name, tmpl, row string
		field           string
		missing         bool
		msg             string // in the error
	}{
		{"missing nested", "{{.meta.lang}}", `{"meta":{}}`, "meta.lang", true, "meta.lang: missing (read by prompt.messages[1] at line 1, col 7)"},
		{"missing parent", "{{.meta.lang}}", `{"q":1}`, "meta", true, "meta: missing"},
		{"missing inside if body", "{{if .q}}{{.other}}{{end}}", `{"q":"x"}`, "other", true, "other: missing"},
		{"missing in range", "{{range .messages}}{{.role}}{{end}}", `{"messages":[{"content":"x"}]}`, "role", true, "role: missing"},
		{"field of a string", "{{.q.x}}", `{"q":"text"}`, "q.x", false, "can't evaluate field x"},
		{"truncate of a list", "{{.tags | truncate 2}}", `{"tags":["a"]}`, "tags", false, "a list, not text"},
		{"join of a string", "{{.q | join \",\"}}", `{"q":"a"}`, "q", false, "join: a string is not a list (in prompt.messages[1]"},
		{"null list item printed", "{{range .xs}}{{.}}{{end}}", `{"xs":["a",null]}`, "", false, "prints a null value"},
		{"index of a missing key", `{{index . "nope"}}`, `{"q":"x"}`, "", false, "prints a null value"},
		{"renders empty", "{{.q}}", `{"q":"   "}`, "", false, "prompt.messages[1] (user) renders empty"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, bad := renderOne(t, userTurn(tt.tmpl), tt.row)
			if bad == nil {
				t.Fatal("rendered")
			}
			if bad.Field != tt.field || errors.Is(bad, ErrMissing) != tt.missing {
				t.Errorf("field %q missing %v, want %q %v: %v", bad.Field, errors.Is(bad, ErrMissing), tt.field, tt.missing, bad)
			}
			if !strings.Contains(bad.Error(), tt.msg) {
				t.Errorf("%q does not say %q", bad.Error(), tt.msg)
			}
			if bad.Line != 1 {
				t.Errorf("line %d", bad.Line)
			}
		})
	}
}

func TestTemplateEmptySystemTurnLeftOut(t *testing.T) {
	got, bad := renderOne(t, []chat.Message{{Role: "system", Content: "{{.sys | default \"\"}}"}, {Role: "user", Content: "{{.q}}"}}, `{"q":"x"}`)
	if bad != nil || !reflect.DeepEqual(got, []chat.Message{u("x")}) {
		t.Errorf("got %q, %v", got, bad)
	}
}

// TestTemplateParseErrors: a template that does not parse is refused when
// the reader opens, with its key, line and column (of the unknown name; of
// the action that does not parse).
func TestTemplateParseErrors(t *testing.T) {
	tests := []struct {
		name string
		msgs []chat.Message
		want string
	}{
		{"unknown function", []chat.Message{{Role: "system", Content: "ok"}, {Role: "user", Content: "first line\nsecond {{.a | nofunc}}"}},
			`prompt.messages[2] (user).content: line 2, col 15: function "nofunc" not defined`},
		{"unclosed action", userTurn("Hello {{.a}"), `prompt.messages[1] (user).content: line 1, col 7: bad character U+007D '}'`},
		{"unexpected end", userTurn("a {{if .a}} b"), `prompt.messages[1] (user).content: line 1, col 3: unexpected EOF`},
		{"unknown role", []chat.Message{{Role: "tool", Content: "x"}}, `prompt.messages[1].role: "tool" is not one of system, user, assistant`},
		{"ends with an answer", []chat.Message{{Role: "user", Content: "q"}, {Role: "assistant", Content: "a"}}, `prompt.messages[2].role: "assistant": the last turn must be a user turn`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "rows.jsonl", `{"a":"x"}`+"\n")
			_, err := Open(Options{Selection: Selection{Path: path}, Template: tt.msgs})
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
}

func TestTemplateAndShape(t *testing.T) {
	path := writeFile(t, t.TempDir(), "rows.jsonl", `{"custom_id":"r1","body":{"messages":[{"role":"user","content":"hi"}]},"q":"x"}`+"\n")
	for _, tt := range []struct {
		name string
		opts Options
		want string // error; "" opens
	}{
		{"auto is rows", Options{Selection: Selection{Format: FormatAuto}, Template: userTurn("{{.q}}")}, ""},
		{"rows", Options{Selection: Selection{Format: FormatRows}, Template: userTurn("{{.q}}")}, ""},
		{"rows without a template", Options{Selection: Selection{Format: FormatRows}}, "prompt.messages, and it is empty"},
		{"another shape", Options{Selection: Selection{Format: FormatPrompt, PromptField: "q"}, Template: userTurn("{{.q}}")}, "set dataset.format to auto or rows"},
		{"turns all", Options{Template: userTurn("{{.q}}"), Conversations: true}, "use turns first"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			tt.opts.Path = path
			r, err := Open(tt.opts)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("error %v, want %q", err, tt.want)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			p, err := r.Next()
			if err != nil {
				t.Fatal(err)
			}
			// A batch-looking row is a bag of fields too: its id is its index.
			if p.ID != "0" || !reflect.DeepEqual(p.Messages, []chat.Message{u("x")}) {
				t.Errorf("got %+v", p)
			}
		})
	}
}

// TestTemplateParquetRows: Parquet columns of their own (a struct, a
// list, bytes, a null) render as the JSON ones do.
func TestTemplateParquetRows(t *testing.T) {
	type meta struct {
		Lang string `parquet:"lang"`
	}
	type pqRow struct {
		Question string   `parquet:"question"`
		Context  *string  `parquet:"context,optional"`
		Tags     []string `parquet:"tags,list"`
		Meta     meta     `parquet:"meta"`
		Raw      []byte   `parquet:"raw"`
		N        int64    `parquet:"n"`
	}
	ctx := "ctx"
	path := filepath.Join(t.TempDir(), "rows.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[pqRow](f)
	if _, err := w.Write([]pqRow{
		{Question: "q0", Context: &ctx, Tags: []string{"a", "b"}, Meta: meta{Lang: "fr"}, Raw: []byte("bytes"), N: 7},
		{Question: "q1", Tags: []string{"c"}, Meta: meta{Lang: "de"}, Raw: []byte("x"), N: 8},
	}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tmpl := userTurn(`{{.question}} [{{.tags | join ","}}] {{.meta.lang}} {{.raw}} {{.n}} {{.context}}`)
	got, bad := readAll(t, Options{Selection: Selection{Path: path}, Template: tmpl})
	if len(got) != 1 || got[0].Messages[0].Content != "q0 [a,b] fr bytes 7 ctx" {
		t.Errorf("got %+v", got)
	}
	if len(bad) != 1 || bad[0].Field != "context" || bad[0].FileRow != 1 || !strings.Contains(bad[0].Error(), "rows.parquet:row 1: context: missing") {
		t.Errorf("bad rows %v: want row 1's null context named", bad)
	}
}
