package template

// What a template's parse trees say: where a parse error is (its column,
// which text/template does not give), and which fields a template
// reads only optionally (the operand of default, the condition of if or
// with), so that a row lacking one is no bad row.

import (
	"strconv"
	"strings"
	"text/template"
	"text/template/parse"
	"unicode/utf8"
)

// parseErrorAt splits text/template's parse error ("template: NAME:LINE:
// MSG", the line being all it says of where) into the line, the column and
// the message. The column is taken from a parse tree, not from the
// message's words:
//
//   - parsed again without the check of functions (parse.SkipFuncCheck),
//     a text that parses failed on a function it does not know: the column
//     is that of the first name in the tree that text/template does not
//     know (each name asked of text/template alone), the node's position;
//   - a text that fails so too has a syntax error: the column is that of
//     the last action opened ("{{") on the line before the error, where
//     the action that does not parse starts; 0 when the line opens none.
func parseErrorAt(name, text string, err error, funcs map[string]any) (line, col int, msg string) {
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
	tr := parse.New(name)
	tr.Mode = parse.SkipFuncCheck
	trees := map[string]*parse.Tree{}
	if _, perr := tr.Parse(text, "", "", trees); perr == nil {
		if n := unknownFunc(trees, funcs); n != nil {
			l, c := textPos(text, n.Position())
			return l, c, msg
		}
	}
	return line, openedAt(text, line), msg
}

// unknownFunc is the first identifier (by its place) of the trees that
// text/template, given funcs, does not know.
func unknownFunc(trees map[string]*parse.Tree, funcs map[string]any) parse.Node {
	var first parse.Node
	known := map[string]bool{}
	for _, t := range trees {
		walkTree(t.Root, func(p *parse.PipeNode) {
			forEachIdent(p, func(id *parse.IdentifierNode) {
				k, asked := known[id.Ident]
				if !asked {
					_, err := template.New("").Funcs(funcs).Parse("{{" + id.Ident + "}}")
					k = err == nil
					known[id.Ident] = k
				}
				if !k && (first == nil || id.Position() < first.Position()) {
					first = id
				}
			})
		}, func(parse.Node) {})
	}
	return first
}

// forEachIdent calls f on every identifier of p, its sub-pipelines' too.
func forEachIdent(p *parse.PipeNode, f func(*parse.IdentifierNode)) {
	if p == nil {
		return
	}
	var arg func(n parse.Node)
	arg = func(n parse.Node) {
		switch n := n.(type) {
		case *parse.IdentifierNode:
			f(n)
		case *parse.ChainNode: // A.b: a name with fields
			arg(n.Node)
		case *parse.PipeNode:
			forEachIdent(n, f)
		}
	}
	for _, c := range p.Cmds {
		for _, a := range c.Args {
			arg(a)
		}
	}
}

// openedAt is the column (1-based, in characters) of the last left
// delimiter on line (1-based) of text, 0 when it has none.
func openedAt(text string, line int) int {
	lines := strings.Split(text, "\n")
	if line > len(lines) {
		return 0
	}
	cur := lines[line-1]
	i := strings.LastIndex(cur, "{{")
	if i < 0 {
		return 0
	}
	return utf8.RuneCountInString(cur[:i]) + 1
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
