package dataset

import (
	"strings"
	"testing"
)

// TestTemplateRenderBounds: a row whose prompt grows past the bound, or
// whose render loops without end, is a bad row naming the bound, its file
// and line and the turn; the next row is asked.
func TestTemplateRenderBounds(t *testing.T) {
	t.Parallel()
	big := strings.Repeat("x", 64<<10)
	for _, tt := range []struct{ name, tmpl, want string }{
		{"too large", `{{if .big}}{{range 100}}{{$.big}}{{end}}{{else}}{{.q}}{{end}}`, "prompt.messages[1] (user) renders over 4 MiB"},
		{"too many steps", `{{if .big}}{{range 1000}}{{range 1000}}{{range 1000}}{{end}}{{end}}{{end}}{{else}}{{.q}}{{end}}`, "prompt.messages[1] (user) takes over"},
		{"recursion", `{{define "r"}}{{template "r" .}}{{end}}{{if .big}}{{template "r" .}}{{else}}{{.q}}{{end}}`, "prompt.messages[1]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), "rows.jsonl", `{"q":"a","big":"`+big+`"}`+"\n"+`{"q":"b"}`+"\n")
			tmpl := userTurn(tt.tmpl)
			got, bad := readAll(t, Options{Selection: Selection{Path: path}, Template: tmpl})
			if len(got) != 1 || got[0].Messages[0].Content != "b" {
				t.Errorf("prompts %+v, want row 2's alone", got)
			}
			if len(bad) != 1 || bad[0].Line != 1 || !strings.Contains(bad[0].Error(), tt.want) || !strings.Contains(bad[0].Error(), "rows.jsonl:1") {
				t.Fatalf("bad rows %v, want line 1 saying %q", bad, tt.want)
			}
		})
	}
}

// TestTemplatePrintsNoGoSyntax: a list or an object printed bare would be
// sent in Go's syntax ([1 map[]]): it is a bad row that says to use json
// or join; json keeps a null as null.
func TestTemplatePrintsNoGoSyntax(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct{ name, tmpl, row, field, want string }{
		{"a list", "{{.xs}}", `{"xs":[1,{}]}`, "xs", "a list: use json or join"},
		{"an object", "Q: {{.m}}", `{"m":{}}`, "m", "an object: use json or join"},
		{"an item of a list", "{{range .xs}}{{.}}{{end}}", `{"xs":[{"a":1}]}`, "", "an object: use json or join"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			_, bad := renderOne(t, userTurn(tt.tmpl), tt.row)
			if bad == nil || bad.Field != tt.field || !strings.Contains(bad.Error(), tt.want) {
				t.Fatalf("bad row %v, want field %q saying %q", bad, tt.field, tt.want)
			}
		})
	}
	for _, tt := range []struct{ tmpl, row, want string }{
		{"{{json .e}}", `{"e":{"k":null,"n":[null,{"z":null}]}}`, `{"k":null,"n":[null,{"z":null}]}`},
		{"{{json .}}", `{"q":"x","k":null}`, `{"k":null,"q":"x"}`},
		{"{{range .xs}}{{json .}}{{end}}", `{"xs":[{"a":null}]}`, `{"a":null}`},
	} {
		got, bad := renderOne(t, userTurn(tt.tmpl), tt.row)
		if bad != nil || len(got) != 1 || got[0].Content != tt.want {
			t.Errorf("%s of %s: %q %v, want %q", tt.tmpl, tt.row, got, bad, tt.want)
		}
	}
}
