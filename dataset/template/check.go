package template

// What a template's parse tree shows to fail on every row is refused when
// it is compiled, with where it is: a call of a template that is not
// defined, a helper given constant arguments it cannot take (their number,
// their type, a negative length), a range over a constant past the
// render's bound of steps. Left to the render, each made every row bad and
// a run of no answer look done.

import (
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// checkTree walks every tree of tt (the turn's own and those it defines)
// and returns the first call that cannot succeed, placed in text.
func checkTree(tt *template.Template, name, role, text string) *Error {
	var found *Error
	fail := func(n parse.Node, format string, args ...any) {
		if found == nil {
			line, col := textPos(text, n.Position())
			found = &Error{Turn: name, Role: role, Line: line, Col: col, Err: fmt.Errorf(format, args...)}
		}
	}
	pipe := func(p *parse.PipeNode) {
		if p == nil {
			return
		}
		for i, c := range p.Cmds {
			checkCall(c, i > 0, fail)
		}
	}
	for _, t := range tt.Templates() {
		if t.Tree == nil {
			continue
		}
		walkTree(t.Tree.Root, pipe, func(n parse.Node) {
			switch n := n.(type) {
			case *parse.TemplateNode:
				if tt.Lookup(n.Name) == nil {
					fail(n, "template %q is not defined (define it with {{define %q}}...{{end}})", n.Name, n.Name)
				}
			case *parse.RangeNode:
				if k, ok := constRange(n.Pipe); ok && k > maxRenderSteps {
					fail(n, "range over %d: more than the %d steps a row's render may take", k, maxRenderSteps)
				}
			}
		})
	}
	return found
}

// walkTree calls pipe on every pipeline under node and at on every node
// that holds one (in the order of the text).
func walkTree(node parse.Node, pipe func(*parse.PipeNode), at func(parse.Node)) {
	var walk func(n parse.Node)
	walk = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.ListNode:
			if n != nil {
				for _, c := range n.Nodes {
					walk(c)
				}
			}
		case *parse.ActionNode:
			at(n)
			pipe(n.Pipe)
		case *parse.TemplateNode:
			at(n)
			pipe(n.Pipe)
		case *parse.IfNode:
			at(n)
			pipe(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			at(n)
			pipe(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			at(n)
			pipe(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		}
	}
	walk(node)
}

// checkCall checks a command that calls one of templateFuncs: the number of
// its arguments (one more when piped) and each constant one against the
// parameter it is passed as.
func checkCall(c *parse.CommandNode, piped bool, fail func(parse.Node, string, ...any)) {
	id, ok := c.Args[0].(*parse.IdentifierNode)
	if !ok {
		return
	}
	fn, ok := templateFuncs[id.Ident]
	if !ok {
		return // text/template's own (printf, index, ...), checked by it
	}
	ft := reflect.TypeOf(fn)
	args := c.Args[1:]
	given := len(args)
	if piped {
		given++
	}
	if given != ft.NumIn() {
		fail(id, "%s takes %d argument%s, given %d", id.Ident, ft.NumIn(), plural(ft.NumIn()), given)
		return
	}
	for i, a := range args {
		want := ft.In(i)
		switch a := a.(type) {
		case *parse.StringNode:
			if want.Kind() != reflect.String && want.Kind() != reflect.Interface {
				fail(a, "%s: argument %d is %s, want %s", id.Ident, i+1, a.Quoted, kindName(want))
			}
		case *parse.NumberNode:
			switch {
			case want.Kind() == reflect.Int && !a.IsInt:
				fail(a, "%s: argument %d is %s, want an integer", id.Ident, i+1, a.Text)
			case want.Kind() == reflect.String:
				fail(a, "%s: argument %d is %s, want text", id.Ident, i+1, a.Text)
			case id.Ident == "truncate" && i == 0 && a.IsInt && a.Int64 < 0:
				fail(a, "truncate %d: the length must not be negative", a.Int64)
			}
		case *parse.BoolNode:
			if want.Kind() != reflect.Interface {
				fail(a, "%s: argument %d is %v, want %s", id.Ident, i+1, a.True, kindName(want))
			}
		}
	}
}

func kindName(t reflect.Type) string {
	switch t.Kind() {
	case reflect.Int:
		return "an integer"
	case reflect.String:
		return "text"
	}
	return t.String()
}

func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// constRange is the integer constant a range's pipeline is alone.
func constRange(p *parse.PipeNode) (int64, bool) {
	if p == nil || len(p.Cmds) != 1 || len(p.Cmds[0].Args) != 1 {
		return 0, false
	}
	n, ok := p.Cmds[0].Args[0].(*parse.NumberNode)
	if !ok || !n.IsInt {
		return 0, false
	}
	return n.Int64, true
}

// textPos is the 1-based line and column (in characters) of the byte
// offset pos of text, as a parse node's Position gives it.
func textPos(text string, pos parse.Pos) (line, col int) {
	p := min(max(int(pos), 0), len(text))
	before := text[:p]
	line = 1 + strings.Count(before, "\n")
	if i := strings.LastIndexByte(before, '\n'); i >= 0 {
		before = before[i+1:]
	}
	return line, utf8.RuneCountInString(before) + 1
}
