package dataset

// Prompt templates (prompt.messages): the messages sent are rendered per
// row by text/template over the row's own fields, so that a dataset of any
// columns makes prompts without a script to reshape it first.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// FormatRows is the row shape of a templated job: the row is a bag of
// fields, and prompt.messages (Options.Template) makes the prompt of them.
// With a template, auto means rows.
const FormatRows = "rows"

// TemplateKey is the config key of the message templates, for messages.
const TemplateKey = "prompt.messages"

// MessageTemplate is one turn of prompt.messages: its role and a
// text/template of its content, rendered over each row's fields.
type MessageTemplate struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// Template is prompt.messages compiled: each turn's content parsed once,
// rendered per row (render).
type Template struct {
	turns []templateTurn
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
// own (index, len, printf, eq, ...).
var templateFuncs = template.FuncMap{
	// json writes a value as compact JSON: {{json .messages}}.
	"json": func(v any) (string, error) {
		var b bytes.Buffer
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return "", err
		}
		return strings.TrimSuffix(b.String(), "\n"), nil
	},
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
	if s, ok := number(v); ok {
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

// TemplateError is a prompt.messages entry that cannot be used: a content
// that does not parse (with where in it), or a role the turns cannot have.
type TemplateError struct {
	// Turn is the key of the entry: "prompt.messages[2]" (1-based, as the
	// config numbers list entries), with its role when known.
	Turn string
	Role string
	// Line and Col are 1-based, in the content; 0 when not known.
	Line, Col int
	Err       error
}

func (e *TemplateError) Error() string {
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

func (e *TemplateError) Unwrap() error { return e.Err }

// templateRoles are the roles a turn of prompt.messages may have.
var templateRoles = map[string]bool{"system": true, "user": true, "assistant": true}

// CompileTemplate parses every turn of msgs (nil: no template, nil). A turn
// that does not parse is a *TemplateError with the line and column; the
// roles must be system, user or assistant, and the last turn a user turn
// (no request ends with an assistant turn).
func CompileTemplate(msgs []MessageTemplate) (*Template, error) {
	if len(msgs) == 0 {
		return nil, nil
	}
	t := &Template{}
	var errs []error
	for i, m := range msgs {
		name := fmt.Sprintf("%s[%d]", TemplateKey, i+1)
		if !templateRoles[m.Role] {
			errs = append(errs, fmt.Errorf("%s.role: %q is not one of system, user, assistant", name, m.Role))
			continue
		}
		tt, err := template.New(name).Option("missingkey=error").Funcs(templateFuncs).Parse(m.Content)
		if err != nil {
			line, col, msg := parseErrorAt(name, m.Content, err)
			errs = append(errs, &TemplateError{Turn: name, Role: m.Role, Line: line, Col: col, Err: errors.New(msg)})
			continue
		}
		turn := templateTurn{role: m.Role, name: name, t: tt}
		if tt.Tree != nil {
			turn.optional = optionalFields(tt.Tree.Root, true, nil)
			turn.operands = helperOperands(tt.Tree, tt.Tree.Root, map[string][]string{})
		}
		t.turns = append(t.turns, turn)
	}
	if len(errs) == 0 && msgs[len(msgs)-1].Role != "user" {
		errs = append(errs, fmt.Errorf("%s[%d].role: %q: the last turn must be a user turn (the answer follows it)", TemplateKey, len(msgs), msgs[len(msgs)-1].Role))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// parseErrorAt splits text/template's parse error ("template: NAME:LINE:
// MSG") into the line, the column and the message. text/template gives
// the line only; the column is where the shortest prefix of that line that
// fails with the same message ends (at the start of a name the message
// quotes), which is where the parser stopped.
func parseErrorAt(name, text string, err error) (line, col int, msg string) {
	rest, ok := strings.CutPrefix(err.Error(), "template: "+name+":")
	if !ok {
		return 0, 0, err.Error()
	}
	num, msg, ok := strings.Cut(rest, ": ")
	if !ok {
		return 0, 0, rest
	}
	line, cerr := strconv.Atoi(num)
	if cerr != nil || line < 1 {
		return 0, 0, rest
	}
	lines := strings.SplitAfter(text, "\n")
	if line > len(lines) || len(lines[line-1]) > 4096 {
		return line, 0, msg
	}
	before := strings.Join(lines[:line-1], "")
	cur := lines[line-1]
	for k := 1; k <= len(cur); k++ {
		if k < len(cur) && !utf8.RuneStart(cur[k]) {
			continue // inside a character
		}
		_, perr := template.New(name).Funcs(templateFuncs).Parse(before + cur[:k])
		if perr == nil {
			continue
		}
		r, ok := strings.CutPrefix(perr.Error(), "template: "+name+":")
		if !ok {
			continue
		}
		if n, m, _ := strings.Cut(r, ": "); n == num && m == msg {
			col = utf8.RuneCountInString(cur[:k])
			if i := strings.IndexByte(msg, '"'); i >= 0 {
				q, _ := strconv.QuotedPrefix(msg[i:])
				if word, err := strconv.Unquote(q); err == nil && word != "" && strings.HasSuffix(cur[:k], word) {
					col -= utf8.RuneCountInString(word) - 1 // at the name's start
				}
			}
			return line, col, msg
		}
	}
	return line, 0, msg
}

// optionalFields lists the field paths of the top-level row that node
// reads as optional: the operand of default, and the condition of if or
// with when it is a field alone. atRoot is whether dot is the row there
// (not inside range or with).
func optionalFields(node parse.Node, atRoot bool, out [][]string) [][]string {
	switch n := node.(type) {
	case *parse.ListNode:
		if n == nil {
			return out
		}
		for _, c := range n.Nodes {
			out = optionalFields(c, atRoot, out)
		}
	case *parse.ActionNode:
		out = optionalPipe(n.Pipe, atRoot, out)
	case *parse.IfNode:
		out = optionalCondition(n.Pipe, atRoot, out)
		out = optionalFields(n.List, atRoot, out)
		out = optionalFields(n.ElseList, atRoot, out)
	case *parse.WithNode:
		out = optionalCondition(n.Pipe, atRoot, out)
		out = optionalFields(n.List, false, out)
		out = optionalFields(n.ElseList, atRoot, out)
	case *parse.RangeNode:
		out = optionalPipe(n.Pipe, atRoot, out)
		out = optionalFields(n.List, false, out)
		out = optionalFields(n.ElseList, atRoot, out)
	}
	return out
}

// optionalCondition marks an if's or with's condition that is one field.
func optionalCondition(p *parse.PipeNode, atRoot bool, out [][]string) [][]string {
	if p != nil && len(p.Decl) == 0 && len(p.Cmds) == 1 && len(p.Cmds[0].Args) == 1 {
		if path := rootPath(p.Cmds[0].Args[0], atRoot); path != nil {
			out = append(out, path)
		}
	}
	return optionalPipe(p, atRoot, out)
}

// optionalPipe marks the operands of default in a pipeline: its last
// argument (default "x" .a), or the command before it (.a | default "x").
func optionalPipe(p *parse.PipeNode, atRoot bool, out [][]string) [][]string {
	if p == nil {
		return out
	}
	for i, c := range p.Cmds {
		for _, a := range c.Args {
			if sub, ok := a.(*parse.PipeNode); ok {
				out = optionalPipe(sub, atRoot, out)
			}
		}
		id, ok := c.Args[0].(*parse.IdentifierNode)
		if !ok || id.Ident != "default" {
			continue
		}
		var operand parse.Node
		switch {
		case len(c.Args) == 3:
			operand = c.Args[2]
		case len(c.Args) == 2 && i > 0 && len(p.Cmds[i-1].Args) == 1:
			operand = p.Cmds[i-1].Args[0]
		}
		if path := rootPath(operand, atRoot); path != nil {
			out = append(out, path)
		}
	}
	return out
}

// helperOperands indexes each call of a helper by its place ("LINE:COL",
// as an execution error gives it) with the path of the field it is
// applied to: its last argument, or the command before it in a pipeline.
func helperOperands(tree *parse.Tree, node parse.Node, out map[string][]string) map[string][]string {
	var pipe func(p *parse.PipeNode)
	pipe = func(p *parse.PipeNode) {
		if p == nil {
			return
		}
		for i, c := range p.Cmds {
			for _, a := range c.Args {
				if sub, ok := a.(*parse.PipeNode); ok {
					pipe(sub)
				}
			}
			id, ok := c.Args[0].(*parse.IdentifierNode)
			if !ok {
				continue
			}
			var path []string
			switch {
			case i > 0 && len(p.Cmds[i-1].Args) == 1:
				// Piped: the final argument is the previous command's value.
				path = fieldPath(p.Cmds[i-1].Args[0])
			case len(c.Args) > 1:
				path = fieldPath(c.Args[len(c.Args)-1])
			}
			if path != nil {
				loc, _ := tree.ErrorContext(id)
				if _, at, ok := strings.Cut(loc, ":"); ok {
					out[at] = path
				}
			}
		}
	}
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
			pipe(n.Pipe)
		case *parse.IfNode:
			pipe(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.WithNode:
			pipe(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		case *parse.RangeNode:
			pipe(n.Pipe)
			walk(n.List)
			walk(n.ElseList)
		}
	}
	walk(node)
	return out
}

// fieldPath is the path a field node reads (.a.b or $.a.b), nil for any
// other node.
func fieldPath(n parse.Node) []string {
	switch f := n.(type) {
	case *parse.FieldNode:
		return f.Ident
	case *parse.VariableNode:
		if len(f.Ident) > 1 && f.Ident[0] == "$" {
			return f.Ident[1:]
		}
	}
	return nil
}

// rootPath is the path from the row's top level that a field node reads
// (.a.b, or $.a.b anywhere), nil for any other node.
func rootPath(n parse.Node, atRoot bool) []string {
	if _, isField := n.(*parse.FieldNode); isField && !atRoot {
		return nil
	}
	return fieldPath(n)
}

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

// render makes the messages of row r, or names the field that makes it a
// bad row. A null field is a missing one. A system turn that renders empty
// is left out; another turn that does is a bad row.
func (t *Template) render(r row) ([]Message, *fieldError) {
	data, _ := templateData(r).(map[string]any)
	msgs := make([]Message, 0, len(t.turns))
	var b strings.Builder
	for i := range t.turns {
		turn := &t.turns[i]
		in := data
		if len(turn.optional) > 0 {
			in = withOptional(data, turn.optional)
		}
		b.Reset()
		if err := turn.t.Execute(&b, in); err != nil {
			return nil, turn.execError(err)
		}
		out := b.String()
		if strings.Contains(out, noValue) && !rowHolds(data, noValue) {
			return nil, fieldErr("", fmt.Errorf("%s (%s) prints a null value (%s would be sent): give it a value with default", turn.name, turn.role, noValue))
		}
		if strings.TrimSpace(out) == "" {
			if turn.role == "system" {
				continue
			}
			return nil, fieldErr("", fmt.Errorf("%s (%s) renders empty", turn.name, turn.role))
		}
		msgs = append(msgs, Message{Role: turn.role, Content: out})
	}
	return msgs, nil
}

// templateData is a row as a template reads it: nulls in objects dropped
// (a null field is a missing one), bytes as text. The row itself is left
// as it is: its id and request fields are read from it as decoded.
func templateData(v any) any {
	switch t := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			if e != nil {
				m[k] = templateData(e)
			}
		}
		return m
	case []any:
		s := make([]any, len(t))
		for i, e := range t {
			s[i] = templateData(e)
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
func (turn *templateTurn) execError(err error) *fieldError {
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
	fe.err = errors.New(strings.TrimPrefix(reason, "error calling "))
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

// checkTemplate checks that a template and the row shape agree, and makes
// auto mean rows when a template is set (so that a row's id is its index
// or id_field, never a batch row's custom_id).
func (o *Options) checkTemplate() error {
	switch {
	case len(o.Template) == 0 && o.Format == FormatRows:
		return fmt.Errorf("dataset format rows: the prompt is made by %s, and it is empty: set it, or choose the rows' shape", TemplateKey)
	case len(o.Template) == 0:
		return nil
	case o.Format == FormatAuto:
		o.Format = FormatRows
	case o.Format != FormatRows:
		return fmt.Errorf("dataset format %s with %s: a template makes the prompt of a row's fields, the %s shape of its own turns: set dataset.format to auto or rows, or remove %s", o.Format, TemplateKey, o.Format, TemplateKey)
	}
	if o.Conversations {
		return fmt.Errorf("%s with generation.turns all: a template makes one prompt per row, and turns all regenerates a dataset's own conversations: use turns first", TemplateKey)
	}
	return nil
}
