package template

// The bounds of one row's render. text/template cannot be interrupted: a
// range over a large number, nested ranges or a template that calls
// itself run on with no output to stop them, and a loop that writes makes
// a prompt of gigabytes. So each row's render is bounded twice, by counts
// and not by a clock (a deadline would make one row bad on a loaded box and
// good on another, and a resume must see the rows its first run saw):
//
//   - in size: the turns write into a writer that fails past
//     maxPromptBytes, which ends Execute at the write that crosses it;
//   - in steps: compile puts a call of stepFunc at the start of every
//     range body and of every template a turn defines (the only ways a
//     render repeats), and that call fails past maxRenderSteps, which
//     ends Execute at the next iteration whether the loop writes or not.
//
// A range over a constant past the bound fails on every row, so compile
// refuses it (check.go). A step costs text/template 1 to 2 µs,
// so the bound of steps ends a render within about a tenth of a second
// (below text/template's own depth of 100,000 calls), and SIGTERM is
// heard at the next row without a context reaching into the render; a
// range that writes 64 bytes a step meets the bound of size first.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"text/template"
	"text/template/parse"
)

const (
	// maxPromptBytes bounds the text one row's turns render to.
	maxPromptBytes = 4 << 20
	// maxRenderSteps bounds the range iterations and template calls of
	// one row's render.
	maxRenderSteps = 1 << 16
)

var (
	errPromptTooLarge = fmt.Errorf("renders over %d MiB (the bound of a prompt)", maxPromptBytes>>20)
	errTooManySteps   = fmt.Errorf("takes over %d steps, range iterations and template calls (the bound of a render)", maxRenderSteps)
)

// The helpers compile adds to a turn's tree; a template's text cannot
// name them (text/template's names may not start with a digit or
// punctuation, so these cannot collide with one a user writes).
const (
	stepFunc  = "_synthgen_step"
	printFunc = "_synthgen_print"
)

// renderState is the state of the render under way: its steps, the bytes
// written, and for json the row's objects as decoded (nulls kept), by the
// object templateData made of each. A Template renders one row at a time
// (render holds mu).
type renderState struct {
	steps   int
	out     boundedWriter
	decoded map[uintptr]map[string]any
}

// funcs are templateFuncs with the helpers bound to st.
func (st *renderState) funcs() template.FuncMap {
	fm := template.FuncMap{}
	for k, v := range templateFuncs {
		fm[k] = v
	}
	fm["json"] = st.json
	fm[stepFunc] = st.step
	fm[printFunc] = printable
	return fm
}

func (st *renderState) reset() {
	st.steps = 0
	st.out.b.Reset()
	st.out.total = 0
	clear(st.decoded)
}

func (st *renderState) step() (string, error) {
	st.steps++
	if st.steps > maxRenderSteps {
		return "", errTooManySteps
	}
	return "", nil
}

// json writes a value as compact JSON, a null as null: {{json .messages}}.
func (st *renderState) json(v any) (string, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(st.withNulls(v)); err != nil {
		return "", err
	}
	return strings.TrimSuffix(b.String(), "\n"), nil
}

// withNulls is v with the nulls templateData dropped from its objects put
// back, bytes as text.
func (st *renderState) withNulls(v any) any {
	switch t := v.(type) {
	case map[string]any:
		src := t
		if d, ok := st.decoded[reflect.ValueOf(t).Pointer()]; ok {
			src = d
		}
		m := make(map[string]any, len(src))
		for k, e := range src {
			if c, ok := t[k]; ok {
				e = c // the template's value: its own objects looked up in turn
			}
			m[k] = st.withNulls(e)
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = st.withNulls(e)
		}
		return s
	case []byte:
		return string(t)
	}
	return v
}

// printable is what an action prints: a list or an object would be sent
// in Go's syntax ([1 map[]]), so it is an error; anything else as it is.
func printable(v any) (any, error) {
	switch reflect.ValueOf(v).Kind() {
	case reflect.Map, reflect.Slice, reflect.Array, reflect.Struct:
		return nil, fmt.Errorf("%s: use json or join to print it", kindOf(v))
	}
	return v, nil
}

// boundedWriter is the text of a row's turns, the current one in b, all
// of them at most maxPromptBytes.
type boundedWriter struct {
	b     strings.Builder
	total int
}

func (w *boundedWriter) Write(p []byte) (int, error) {
	if w.total+len(p) > maxPromptBytes {
		return 0, errPromptTooLarge
	}
	w.total += len(p)
	return w.b.Write(p)
}

// instrument adds the bounds' calls to every tree of tt: a step at the
// start of each range body and each defined template, and printFunc at
// the end of each pipeline that prints (its operand, a field alone, in
// operands by its place, so that its error names the field).
func instrument(tt *template.Template, operands map[string][]string) {
	for _, t := range tt.Templates() {
		if t.Tree == nil || t.Tree.Root == nil {
			continue
		}
		tree := t.Tree
		walkTree(tree.Root, func(*parse.PipeNode) {}, func(n parse.Node) {
			switch n := n.(type) {
			case *parse.ActionNode:
				if len(n.Pipe.Decl) == 0 && len(n.Pipe.Cmds) > 0 {
					last := n.Pipe.Cmds[len(n.Pipe.Cmds)-1]
					c := call(tree, printFunc, last.Position())
					n.Pipe.Cmds = append(n.Pipe.Cmds, c)
					if len(last.Args) == 1 && fieldPath(last.Args[0]) != nil {
						loc, _ := tree.ErrorContext(c.Args[0])
						if _, at, ok := strings.Cut(loc, ":"); ok && operands[at] == nil {
							operands[at] = fieldPath(last.Args[0])
						}
					}
				}
			case *parse.RangeNode:
				if n.List != nil {
					n.List.Nodes = append([]parse.Node{stepAction(tree, n.Position())}, n.List.Nodes...)
				}
			}
		})
		if t != tt {
			tree.Root.Nodes = append([]parse.Node{stepAction(tree, tree.Root.Position())}, tree.Root.Nodes...)
		}
	}
}

// call is a command calling the helper name, placed at pos for errors.
func call(tree *parse.Tree, name string, pos parse.Pos) *parse.CommandNode {
	id := parse.NewIdentifier(name).SetTree(tree).SetPos(pos)
	return &parse.CommandNode{NodeType: parse.NodeCommand, Pos: pos, Args: []parse.Node{id}}
}

func stepAction(tree *parse.Tree, pos parse.Pos) *parse.ActionNode {
	return &parse.ActionNode{NodeType: parse.NodeAction, Pos: pos, Pipe: &parse.PipeNode{
		NodeType: parse.NodePipe, Pos: pos, Cmds: []*parse.CommandNode{call(tree, stepFunc, pos)},
	}}
}

// boundError is the bound a render's error crossed, nil for another error.
func boundError(err error) error {
	for _, b := range []error{errPromptTooLarge, errTooManySteps} {
		if errors.Is(err, b) {
			return b
		}
	}
	return nil
}
