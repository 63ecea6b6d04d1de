package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// TestArchitectureImportsAreTheCode: ARCHITECTURE.md's list of the imports
// between the project's packages is the code's, every package and every
// import of another package of the module (tests left out), so the map a
// reader trusts cannot drift from what the code does.
func TestArchitectureImportsAreTheCode(t *testing.T) {
	root := filepath.Join("..", "..")
	const module = "github.com/synthgen/synthgen/"
	code := map[string][]string{}
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") && path != root {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ImportsOnly|parser.ParseComments)
		if err != nil {
			return err
		}
		if ignored(f.Comments) {
			return nil // a //go:build ignore script: no package of the build
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		pkg := filepath.ToSlash(rel)
		if _, ok := code[pkg]; !ok {
			code[pkg] = nil
		}
		for _, imp := range f.Imports {
			p := strings.Trim(imp.Path.Value, `"`)
			if dep, ok := strings.CutPrefix(p, module); ok && !slices.Contains(code[pkg], dep) {
				code[pkg] = append(code[pkg], dep)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, block, _ := strings.Cut(string(doc), "\n## Packages and their imports")
	block, _, _ = strings.Cut(block, "\n## ")
	line := regexp.MustCompile(`(?m)^(\S+)\s+-> (.*)$`)
	written := map[string][]string{}
	for _, m := range line.FindAllStringSubmatch(block, -1) {
		deps := strings.Fields(m[2])
		if m[2] == "(none)" {
			deps = nil
		}
		written[m[1]] = deps
	}
	for pkg, deps := range code {
		slices.Sort(deps)
		got, ok := written[pkg]
		if !ok {
			t.Errorf("ARCHITECTURE.md lists no package %s (it imports %v)", pkg, deps)
			continue
		}
		slices.Sort(got)
		if !slices.Equal(got, deps) {
			t.Errorf("ARCHITECTURE.md: %s -> %v, the code: %v", pkg, got, deps)
		}
	}
	for pkg := range written {
		if _, ok := code[pkg]; !ok {
			t.Errorf("ARCHITECTURE.md lists %s, which is no package of the code", pkg)
		}
	}
	if t.Failed() {
		t.Log("regenerate the list with: go list -f '{{.ImportPath}}: {{join .Imports \" \"}}' ./...")
	}
}

// ignored reports whether a file's build constraint is "ignore".
func ignored(groups []*ast.CommentGroup) bool {
	for _, g := range groups {
		for _, c := range g.List {
			if strings.TrimSpace(c.Text) == "//go:build ignore" {
				return true
			}
		}
	}
	return false
}
