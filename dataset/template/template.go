// Package template makes the messages of a dataset row from prompt.messages:
// each turn's content is a text/template rendered over the row's own fields,
// so that a dataset of any columns makes prompts without a script to
// reshape it first. Compile refuses what fails on every row; Render makes
// one row's messages or names the field that makes it a bad row, within
// bounds of size and steps (bound.go).
package template

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"text/template"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset/internal/number"
)

// Key is the config key of the message templates, for messages.
const Key = "prompt.messages"

// Template is prompt.messages compiled: each turn's content parsed once,
// rendered per row (render).
type Template struct {
	turns []templateTurn
	mu    sync.Mutex
	state renderState // the render under way (bound.go)
}

type templateTurn struct {
	role string
	name string // "prompt.messages[2]": its key, for messages
	t    *template.Template
	// optional are the field paths (from the row's top level) that may be
	// missing: the operand of default, the condition of if and with. A
	// missing one is null to the template, so that
	// {{.lang | default "en"}} works; any other missing field makes the
	// row bad.
	optional [][]string
	// operands are the field paths that the helper called at a place
	// ("LINE:COL") is applied to, so that its error names the field.
	operands map[string][]string
}

// noValue is what text/template prints for a null value. It is never sent.
const noValue = "<no value>"

// templateFuncs are the helpers a template may call besides text/template's
// own (index, len, printf, eq, ...). Each Template binds json to its render
// (renderState.json), which keeps a row's nulls.
var templateFuncs = template.FuncMap{
	// json writes a value as compact JSON: {{json .messages}}.
	"json": (*renderState)(nil).json,
	// trim drops leading and trailing white space: {{trim .question}}.
	"trim": func(v any) (string, error) {
		s, err := templateText(v)
		return strings.TrimSpace(s), err
	},
	// truncate keeps the first n characters (runes): {{.context | truncate 2000}}.
	"truncate": func(n int, v any) (string, error) {
		s, err := templateText(v)
		if err != nil || n < 0 {
			if n < 0 {
				err = fmt.Errorf("truncate %d: the length must not be negative", n)
			}
			return "", err
		}
		i := 0
		for k := range s {
			if i == n {
				return s[:k], nil
			}
			i++
		}
		return s, nil
	},
	// default is d when v is missing, null or "": {{.lang | default "en"}}.
	"default": func(d, v any) any {
		if v == nil {
			return d
		}
		if s, ok := v.(string); ok && s == "" {
			return d
		}
		return v
	},
	// join joins a list's items with sep: {{.tags | join ", "}}.
	"join": func(sep string, v any) (string, error) {
		items, ok := v.([]any)
		if !ok {
			if ss, isStrings := v.([]string); isStrings {
				return strings.Join(ss, sep), nil
			}
			return "", fmt.Errorf("%s is not a list", kindOf(v))
		}
		parts := make([]string, len(items))
		for i, it := range items {
			s, err := templateText(it)
			if err != nil {
				return "", fmt.Errorf("item %d: %w", i, err)
			}
			parts[i] = s
		}
		return strings.Join(parts, sep), nil
	},
}

// templateText is a value the text helpers take: a string, or a number or
// boolean as text.
func templateText(v any) (string, error) {
	switch t := v.(type) {
	case string:
		return t, nil
	case nil:
		return "", errors.New("null, not text (default gives a value for it)")
	case bool:
		return strconv.FormatBool(t), nil
	}
	if s, ok := number.Decimal(v); ok {
		return s, nil
	}
	return "", fmt.Errorf("%s, not text (json writes it as JSON)", kindOf(v))
}

func kindOf(v any) string {
	switch v.(type) {
	case map[string]any:
		return "an object"
	case []any:
		return "a list"
	case nil:
		return "null"
	}
	return fmt.Sprintf("a %T", v)
}

// Error is a prompt.messages entry that cannot be used: a content
// that does not parse (with where in it), or a role the turns cannot have.
type Error struct {
	// Turn is the key of the entry: "prompt.messages[2]" (1-based, as the
	// config numbers list entries), with its role when known.
	Turn string
	Role string
	// Line and Col are 1-based, in the content; 0 when not known.
	Line, Col int
	Err       error
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Turn)
	if e.Role != "" {
		fmt.Fprintf(&b, " (%s)", e.Role)
	}
	b.WriteString(".content")
	switch {
	case e.Line > 0 && e.Col > 0:
		fmt.Fprintf(&b, ": line %d, col %d", e.Line, e.Col)
	case e.Line > 0:
		fmt.Fprintf(&b, ": line %d", e.Line)
	}
	fmt.Fprintf(&b, ": %v", e.Err)
	return b.String()
}

func (e *Error) Unwrap() error { return e.Err }

// templateRoles are the roles a turn of prompt.messages may have.
var templateRoles = map[string]bool{"system": true, "user": true, "assistant": true}

// Compile parses every turn of msgs (nil: no template, nil): its role
// and its content, a text/template (a template turn has no tool calls;
// prompt.messages cannot give one). A turn that does not parse is an *Error with the line and column; the
// roles must be system, user or assistant, and the last turn a user turn
// (no request ends with an assistant turn).
func Compile(msgs []chat.Message) (*Template, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	t := &Template{state: renderState{decoded: map[uintptr]map[string]any{}}}
	funcs := t.state.funcs()
	var errs []error
	for i, m := range msgs {
		name := fmt.Sprintf("%s[%d]", Key, i+1)
		if !templateRoles[m.Role] {
			errs = append(errs, fmt.Errorf("%s.role: %q is not one of system, user, assistant", name, m.Role))
			continue
		}
		tt, err := template.New(name).Option("missingkey=error").Funcs(funcs).Parse(m.Content)
		if err != nil {
			line, col, msg := parseErrorAt(name, m.Content, err, funcs)
			errs = append(errs, &Error{Turn: name, Role: m.Role, Line: line, Col: col, Err: errors.New(msg)})
			continue
		}
		if te := checkTree(tt, name, m.Role, m.Content); te != nil {
			errs = append(errs, te)
			continue
		}
		turn := templateTurn{role: m.Role, name: name, t: tt}
		if tt.Tree != nil {
			turn.optional = optionalFields(tt.Tree.Root, true, nil)
			turn.operands = helperOperands(tt.Tree, tt.Tree.Root, map[string][]string{})
		}
		instrument(tt, turn.operands)
		t.turns = append(t.turns, turn)
	}
	if len(errs) == 0 && msgs[len(msgs)-1].Role != "user" {
		errs = append(errs, fmt.Errorf("%s[%d].role: %q: the last turn must be a user turn (the answer follows it)", Key, len(msgs), msgs[len(msgs)-1].Role))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// FieldError is what makes a row bad: the path of its field ("" for the
// row as a whole) and what is wrong with it.
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string {
	if e.Field == "" {
		return e.Err.Error()
	}
	return e.Field + ": " + e.Err.Error()
}

func (e *FieldError) Unwrap() error { return e.Err }

func fieldErr(field string, err error) *FieldError { return &FieldError{Field: field, Err: err} }

// ErrMissing is a field the row lacks (or holds null) that a template
// reads; package dataset's ErrMissing is this one.
var ErrMissing = errors.New("missing")

// templateFieldError is a field a template reads that the row lacks, or
// cannot read as the template says: where the template reads it.
type templateFieldError struct {
	turn      string // "prompt.messages[2]"
	line, col int
	err       error
}

func (e *templateFieldError) Error() string {
	at := e.turn
	if e.line > 0 {
		at += fmt.Sprintf(" at line %d, col %d", e.line, e.col)
	}
	if errors.Is(e.err, ErrMissing) {
		return fmt.Sprintf("missing (read by %s)", at)
	}
	return fmt.Sprintf("%v (in %s)", e.err, at)
}

func (e *templateFieldError) Unwrap() error { return e.err }

// Render makes the messages of row r, new ones each call (a decoded row: JSON numbers as
// json.Number, Parquet bytes as []byte), or names the field that makes it
// a bad row (a *FieldError). A null field is a missing one. A system turn that renders empty
// is left out; another turn that does is a bad row.
func (t *Template) Render(r map[string]any) ([]chat.Message, *FieldError) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st := &t.state
	st.reset()
	data, _ := st.templateData(r).(map[string]any)
	msgs := make([]chat.Message, 0, len(t.turns))
	for i := range t.turns {
		turn := &t.turns[i]
		in := data
		if len(turn.optional) > 0 {
			in = withOptional(data, turn.optional)
			st.decoded[reflect.ValueOf(in).Pointer()] = r
		}
		st.out.b.Reset()
		if err := turn.t.Execute(&st.out, in); err != nil {
			if bound := boundError(err); bound != nil {
				return nil, fieldErr("", fmt.Errorf("%s (%s) %w", turn.name, turn.role, bound))
			}
			return nil, turn.execError(err)
		}
		out := st.out.b.String()
		if strings.Contains(out, noValue) && !rowHolds(data, noValue) {
			return nil, fieldErr("", fmt.Errorf("%s (%s) prints a null value (%s would be sent): give it a value with default", turn.name, turn.role, noValue))
		}
		if strings.TrimSpace(out) == "" {
			if turn.role == "system" {
				continue
			}
			return nil, fieldErr("", fmt.Errorf("%s (%s) renders empty", turn.name, turn.role))
		}
		msgs = append(msgs, chat.Message{Role: turn.role, Content: out})
	}
	return msgs, nil
}

// templateData is a row as a template reads it: nulls in objects dropped
// (a null field is a missing one), bytes as text. The row itself is left
// as it is: its id and request fields are read from it as decoded.
//
// Each object made is remembered with the one it was made of, so that json
// writes the nulls the template does not see.
func (st *renderState) templateData(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			if e != nil {
				m[k] = st.templateData(e)
			}
		}
		st.decoded[reflect.ValueOf(m).Pointer()] = t
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = st.templateData(e)
		}
		return s
	case []byte:
		return string(t)
	}
	return v
}

// withOptional is data with each optional path it lacks set to null (the
// objects on the way created), copied where it changes.
func withOptional(data map[string]any, paths [][]string) map[string]any {
	out := data
	copied := false
	for _, p := range paths {
		if has(data, p) {
			continue
		}
		if !copied {
			out = shallowCopy(data)
			copied = true
		}
		setPath(out, p)
	}
	return out
}

func has(m map[string]any, path []string) bool {
	var v any = m
	for _, k := range path {
		obj, ok := v.(map[string]any)
		if !ok {
			return true // not an object: the template's error says so
		}
		if v, ok = obj[k]; !ok {
			return false
		}
	}
	return true
}

// setPath sets path in m to null, copying the objects on the way so that
// the row's own are not changed.
func setPath(m map[string]any, path []string) {
	for _, k := range path[:len(path)-1] {
		next, ok := m[k].(map[string]any)
		if _, present := m[k]; present && !ok {
			return
		}
		if ok {
			next = shallowCopy(next)
		} else {
			next = map[string]any{}
		}
		m[k] = next
		m = next
	}
	m[path[len(path)-1]] = nil
}

func shallowCopy(m map[string]any) map[string]any {
	c := make(map[string]any, len(m)+1)
	for k, v := range m {
		c[k] = v
	}
	return c
}

// rowHolds reports whether a text of v holds s (a row whose own text
// holds "<no value>" may print it).
func rowHolds(v any, s string) bool {
	switch t := v.(type) {
	case string:
		return strings.Contains(t, s)
	case map[string]any:
		for _, e := range t {
			if rowHolds(e, s) {
				return true
			}
		}
	case []any:
		for _, e := range t {
			if rowHolds(e, s) {
				return true
			}
		}
	}
	return false
}

// execError turns text/template's execution error into the field it is
// about. Its text is "template: NAME:LINE:COL: executing "NAME" at <NODE>:
// REASON"; a missing key's REASON is `map has no entry for key "K"`.
func (turn *templateTurn) execError(err error) *FieldError {
	msg := err.Error()
	rest, ok := strings.CutPrefix(msg, "template: "+turn.name+":")
	if !ok {
		return fieldErr("", fmt.Errorf("%s: %v", turn.name, err))
	}
	fe := &templateFieldError{turn: turn.name}
	var at string
	if pos, tail, ok := strings.Cut(rest, ": "); ok {
		at = pos
		l, c, _ := strings.Cut(pos, ":")
		fe.line, _ = strconv.Atoi(l)
		fe.col, _ = strconv.Atoi(c)
		rest = tail
	}
	node, reason := "", rest
	if _, after, ok := strings.Cut(rest, " at <"); ok {
		if n, r, ok := strings.Cut(after, ">: "); ok {
			node, reason = n, r
		}
	}
	path := nodePath(node)
	if key, ok := strings.CutPrefix(reason, "map has no entry for key "); ok {
		if k, err := strconv.Unquote(key); err == nil {
			for i, p := range path {
				if p == k {
					path = path[:i+1]
					break
				}
			}
			fe.err = ErrMissing
			return fieldErr(strings.Join(path, "."), fe)
		}
	}
	if path == nil {
		path = turn.operands[at] // a helper's error: the field it was given
	}
	reason = strings.TrimPrefix(reason, "error calling ")
	reason = strings.TrimPrefix(reason, printFunc+": ")
	fe.err = errors.New(reason)
	return fieldErr(strings.Join(path, "."), fe)
}

// nodePath is the field path a node's text names (".a.b", "$.a.b"), nil
// for anything else.
func nodePath(node string) []string {
	s, ok := strings.CutPrefix(node, "$")
	if !strings.HasPrefix(s, ".") || (ok && s == "") {
		return nil
	}
	parts := strings.Split(s[1:], ".")
	for _, p := range parts {
		if p == "" || strings.ContainsAny(p, " ()|\"") {
			return nil
		}
	}
	return parts
}
