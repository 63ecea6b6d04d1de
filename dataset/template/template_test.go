package template

import (
	"encoding/json"
	"errors"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/chat"
)

func userTurn(content string) []chat.Message {
	return []chat.Message{{Role: "user", Content: content}}
}

// TestCompileErrorHasItsPlace: a template that does not parse is an
// *Error with its line and column.
func TestCompileErrorHasItsPlace(t *testing.T) {
	var te *Error
	if _, err := Compile(userTurn("{{.a")); !errors.As(err, &te) || te.Line != 1 || te.Col == 0 {
		t.Errorf("Compile: %#v, want an *Error with line and column", err)
	}
}

// TestTemplateRefusedAtCompile: what fails on every row (a template that
// is not defined, a helper's constant argument it cannot take, a range
// over a constant past the render's bound) is refused when the template is
// compiled, before any row, with the key, line and column (of the name or
// the argument at fault): not a run of bad rows that ends done with no
// answer.
func TestTemplateRefusedAtCompile(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, tmpl, want string }{
		{"undefined template", `{{template "nope"}}`, `prompt.messages[1] (user).content: line 1, col 12: template "nope" is not defined`},
		{"undefined template on line 2", "x\n  {{ template \"nope\" .}}", `line 2, col 15: template "nope" is not defined`},
		{"negative truncate", `{{.q | truncate -1}}`, `line 1, col 17: truncate -1: the length must not be negative`},
		{"truncate of a word", `{{truncate "x" .q}}`, `line 1, col 12: truncate: argument 1 is "x", want an integer`},
		{"too many arguments", `{{trim .q .r}}`, `line 1, col 3: trim takes 1 argument, given 2`},
		{"range over a huge constant", `{{range 100000000000}}{{end}}ok`, `line 1, col 9: range over 100000000000: more than`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Compile(userTurn(tt.tmpl))
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v, want %q", err, tt.want)
			}
		})
	}
	// What a defined template or a later constant makes right compiles.
	for _, ok := range []string{`{{define "t"}}x{{end}}{{template "t"}}`, `{{.q | truncate 0}}`, `{{range 3}}{{$.q}}{{end}}`, `{{printf "%d" 3}}`} {
		if _, err := Compile(userTurn(ok)); err != nil {
			t.Errorf("%s: %v", ok, err)
		}
	}
}

// FuzzTemplateCompile: any template text compiles or is refused with an
// *Error, never a panic, whose line is one of the text's and whose column
// points into that line: at the name it says is unknown (or the action
// holding it, when the text does not parse without it either), at the
// argument or the range at fault, or at the action that does not parse.
func FuzzTemplateCompile(f *testing.F) {
	for _, s := range []string{"{{.a}}", "Hello {{.a}", "{{if .a}}x", "{{.a | nofunc}}", "x\n {{ .a | trim | nofunc 3}}", "{{range .x}}{{.}}{{end}}", "é{{.é", "{{/* c */}}", "{{json .m | truncate 3}}",
		`é {{template "nope"}}`, "{{truncate -1 .a}}", `{{trim "a" "b"}}`, "{{range 99999999}}{{end}}", "{{if .a}}\n{{else}}{{nofunc}}{{end}}", "{{define \"x\"}}{{nofunc .a}}{{end}}", "{{A0", "{{define \"\"}}{{A.A B}}{{end}}"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, text string) {
		_, err := Compile(userTurn(text))
		if err == nil {
			return
		}
		var te *Error
		if !errors.As(err, &te) {
			t.Fatalf("%q: %T %v", text, err, err)
		}
		lines := strings.Split(text, "\n")
		if te.Line < 0 || te.Line > len(lines) || (te.Line == 0 && te.Col != 0) {
			t.Fatalf("%q: %v: line %d of %d", text, err, te.Line, len(lines))
		}
		if te.Col == 0 {
			return
		}
		line := []rune(lines[te.Line-1])
		if te.Col > len(line) {
			t.Fatalf("%q: %v: col %d past the line's %d characters", text, err, te.Col, len(line))
		}
		at := string(line[te.Col-1:])
		msg := te.Err.Error()
		var want string
		if q, ok := quotedAfter(msg, "function "); ok && strings.HasSuffix(msg, "not defined") {
			want = q
			if strings.HasPrefix(at, "{{") {
				want = "{{" // the action that holds it, when a syntax error follows
			}
		} else if _, ok := quotedAfter(msg, "template "); ok {
			want = "" // the name as quoted in the text: "x" or `x`
			if !strings.HasPrefix(at, `"`) && !strings.HasPrefix(at, "`") {
				t.Fatalf("%q: %v: col %d is at %q, not at the template's name", text, err, te.Col, at)
			}
		} else if strings.Contains(msg, "argument") || strings.HasPrefix(msg, "truncate ") || strings.HasPrefix(msg, "range over") {
			want = "" // an argument, a number or a name: not white space
			if strings.TrimLeft(at, " \t\r") != at {
				t.Fatalf("%q: %v: col %d is at white space", text, err, te.Col)
			}
		} else {
			want = "{{"
		}
		if !strings.HasPrefix(at, want) {
			t.Fatalf("%q: %v: col %d is at %q, want %q", text, err, te.Col, at, want)
		}
	})
}

// quotedAfter is the Go-quoted word after prefix in msg.
func quotedAfter(msg, prefix string) (string, bool) {
	i := strings.Index(msg, prefix+`"`)
	if i < 0 {
		return "", false
	}
	q, err := strconv.QuotedPrefix(msg[i+len(prefix):])
	if err != nil {
		return "", false
	}
	w, err := strconv.Unquote(q)
	return w, err == nil
}

// FuzzTemplateRender: any JSON row renders or is a bad row, and what
// renders never holds <no value> unless the row's own text does.
func FuzzTemplateRender(f *testing.F) {
	for _, s := range []string{`{"q":"x","context":"c","lang":"en"}`, `{"q":null}`, `{"xs":["a",null]}`, `{"meta":{"lang":3}}`, `{"q":"<no value>"}`, `{"messages":[{"role":"user"}]}`} {
		f.Add(s)
	}
	tmpl, err := Compile([]chat.Message{
		{Role: "system", Content: `{{.lang | default "en"}} {{if .context}}{{.context}}{{end}}`},
		{Role: "user", Content: `{{.q}} {{range .xs}}{{.}}{{end}} {{json .meta}} {{.meta.lang | default 1}} {{range .messages}}{{.role}}{{end}} {{truncate 5 (trim (printf "%v" .q))}}`},
	})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, line string) {
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var r map[string]any
		if dec.Decode(&r) != nil || r == nil {
			return
		}
		msgs, fe := tmpl.Render(r)
		if fe != nil {
			return
		}
		for _, m := range msgs {
			if strings.Contains(m.Content, noValue) && !rowHolds(r, noValue) {
				t.Fatalf("%s rendered %q", line, m.Content)
			}
		}
	})
}
