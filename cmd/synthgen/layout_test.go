package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// The structure ARCHITECTURE.md promises, held to the code: the top-level
// folders import one way, each central word is one type, each file of an
// output directory is spelled in one package, and no function or package
// grows past what a person can hold. Each check reads the source as text
// (go/parser), so it costs milliseconds and runs with the rest of the suite.

// sourceFile is one non-test Go file of the module, parsed.
type sourceFile struct {
	pkg  string // its folder, slash-separated, relative to the module root
	path string // relative to the module root
	file *ast.File
	fset *token.FileSet
}

// moduleSources parses every non-test Go file of the module once.
func moduleSources(t *testing.T) []sourceFile {
	t.Helper()
	root := filepath.Join("..", "..")
	var out []sourceFile
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata" || d.Name() == "node_modules") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		if ignored(f.Comments) {
			return nil
		}
		rel, _ := filepath.Rel(root, path)
		rel = filepath.ToSlash(rel)
		out = append(out, sourceFile{pkg: filepath.ToSlash(filepath.Dir(rel)), path: rel, file: f, fset: fset})
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// top is a package's top-level folder.
func top(pkg string) string {
	first, _, _ := strings.Cut(pkg, "/")
	return first
}

// TestTopLevelFoldersImportOneWay: no two top-level folders reach each other
// through any of their packages, so the floors can be read off the folders
// (a cycle is named with the import that closes it).
func TestTopLevelFoldersImportOneWay(t *testing.T) {
	t.Parallel()
	const module = "github.com/synthgen/synthgen/"
	edges := map[string]map[string]string{} // folder -> folder -> one import that makes the edge
	for _, sf := range moduleSources(t) {
		for _, imp := range sf.file.Imports {
			p, _ := strconv.Unquote(imp.Path.Value)
			dep, ok := strings.CutPrefix(p, module)
			if !ok || top(dep) == top(sf.pkg) {
				continue
			}
			if edges[top(sf.pkg)] == nil {
				edges[top(sf.pkg)] = map[string]string{}
			}
			edges[top(sf.pkg)][top(dep)] = sf.path + " imports " + dep
		}
	}
	// Depth-first search for a back edge; the path to it is the cycle.
	const (
		unseen = iota
		open
		done
	)
	state := map[string]int{}
	var stack []string
	var visit func(string) bool
	visit = func(n string) bool {
		state[n] = open
		stack = append(stack, n)
		deps := make([]string, 0, len(edges[n]))
		for d := range edges[n] {
			deps = append(deps, d)
		}
		slices.Sort(deps)
		for _, d := range deps {
			switch state[d] {
			case open:
				i := slices.Index(stack, d)
				var why []string
				cycle := append(slices.Clone(stack[i:]), d)
				for k := 0; k+1 < len(cycle); k++ {
					why = append(why, edges[cycle[k]][cycle[k+1]])
				}
				t.Errorf("top-level folders import in a cycle %s: %s", strings.Join(cycle, " -> "), strings.Join(why, "; "))
				return true
			case unseen:
				if visit(d) {
					return true
				}
			}
		}
		stack = stack[:len(stack)-1]
		state[n] = done
		return false
	}
	folders := make([]string, 0, len(edges))
	for f := range edges {
		folders = append(folders, f)
	}
	slices.Sort(folders)
	for _, f := range folders {
		if state[f] == unseen && visit(f) {
			return
		}
	}
}

// TestOneTypePerChatWord: a message and a tool call are one type each
// outside the mock server, which imitates a server and keeps its own.
func TestOneTypePerChatWord(t *testing.T) {
	t.Parallel()
	where := map[string][]string{}
	for _, sf := range moduleSources(t) {
		if top(sf.pkg) == "mockserver" {
			continue
		}
		for _, decl := range sf.file.Decls {
			g, ok := decl.(*ast.GenDecl)
			if !ok || g.Tok != token.TYPE {
				continue
			}
			for _, spec := range g.Specs {
				ts := spec.(*ast.TypeSpec)
				if _, isStruct := ts.Type.(*ast.StructType); isStruct && (ts.Name.Name == "Message" || ts.Name.Name == "ToolCall") {
					where[ts.Name.Name] = append(where[ts.Name.Name], sf.path)
				}
			}
		}
	}
	for _, name := range []string{"Message", "ToolCall"} {
		if len(where[name]) != 1 {
			t.Errorf("type %s struct is defined in %d files, want 1: %v", name, len(where[name]), where[name])
		}
	}
}

// TestOutputDirectoryFilesSpelledOnce: each file name of an output
// directory is a string in one package, the type that owns the directory,
// so a new file is added in one place.
func TestOutputDirectoryFilesSpelledOnce(t *testing.T) {
	t.Parallel()
	names := []string{"manifest.json", "status.json", "report.json", "history.jsonl", "batches.json"}
	where := map[string]map[string]bool{}
	for _, sf := range moduleSources(t) {
		if top(sf.pkg) == "mockserver" || top(sf.pkg) == "bench" {
			continue
		}
		ast.Inspect(sf.file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				return true
			}
			for _, name := range names {
				if s == name || strings.HasSuffix(s, "/"+name) {
					if where[name] == nil {
						where[name] = map[string]bool{}
					}
					where[name][sf.pkg] = true
				}
			}
			return true
		})
	}
	for _, name := range names {
		if len(where[name]) > 1 {
			pkgs := make([]string, 0, len(where[name]))
			for p := range where[name] {
				pkgs = append(pkgs, p)
			}
			slices.Sort(pkgs)
			t.Errorf("%q is spelled in %d packages, want 1: %v", name, len(pkgs), pkgs)
		}
	}
}

// TestSizesAPersonCanHold: no function over 120 lines and at most 8 over
// 80; no package over 3,500 lines; every package says what it is for.
func TestSizesAPersonCanHold(t *testing.T) {
	t.Parallel()
	var over80 []string
	lines := map[string]int{}
	documented := map[string]bool{}
	for _, sf := range moduleSources(t) {
		lines[sf.pkg] += sf.fset.Position(sf.file.End()).Line
		if sf.file.Doc != nil {
			documented[sf.pkg] = true
		}
		for _, decl := range sf.file.Decls {
			fd, ok := decl.(*ast.FuncDecl)
			if !ok || fd.Body == nil {
				continue
			}
			n := sf.fset.Position(fd.End()).Line - sf.fset.Position(fd.Pos()).Line + 1
			name := sf.path + ":" + fd.Name.Name
			if n > 120 {
				t.Errorf("%s is %d lines: over 120, split it where a step is a natural unit", name, n)
			}
			if n > 80 {
				over80 = append(over80, name+" ("+strconv.Itoa(n)+")")
			}
		}
	}
	if len(over80) > 8 {
		t.Errorf("%d functions over 80 lines, at most 8: %v", len(over80), over80)
	}
	for pkg, n := range lines {
		if n > 3500 {
			t.Errorf("package %s is %d lines: over 3,500, it does more than one job", pkg, n)
		}
		if !documented[pkg] {
			t.Errorf("package %s has no package comment", pkg)
		}
	}
}

// TestNoRacePackagesStartNoGoroutine: the packages the Makefile tests
// without the race detector (NORACE_PACKAGES) start no goroutine and share
// no memory through sync, in their code, their tests or the module's
// packages they import, so the detector has nothing to watch there. A
// package that starts one goes back under -race by leaving the list.
func TestNoRacePackagesStartNoGoroutine(t *testing.T) {
	t.Parallel()
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	var listed []string
	for line := range strings.Lines(string(makefile)) {
		if rest, ok := strings.CutPrefix(line, "NORACE_PACKAGES :="); ok {
			listed = strings.Fields(rest)
		}
	}
	if len(listed) == 0 {
		t.Fatal("the Makefile sets no NORACE_PACKAGES := line")
	}
	const module = "github.com/synthgen/synthgen/"
	seen := map[string]bool{}
	var check func(pkg, via string)
	check = func(pkg, via string) {
		if seen[pkg] {
			return
		}
		seen[pkg] = true
		paths, err := filepath.Glob(filepath.Join("..", "..", filepath.FromSlash(pkg), "*.go"))
		if err != nil || len(paths) == 0 {
			t.Errorf("NORACE_PACKAGES: %s%s holds no Go files (%v)", pkg, via, err)
			return
		}
		for _, path := range paths {
			if via != "" && strings.HasSuffix(path, "_test.go") {
				continue // an imported package's tests are not in the listed package's binary
			}
			fset := token.NewFileSet()
			f, err := parser.ParseFile(fset, path, nil, parser.SkipObjectResolution)
			if err != nil {
				t.Fatal(err)
			}
			for _, imp := range f.Imports {
				p, _ := strconv.Unquote(imp.Path.Value)
				switch {
				case p == "sync" || p == "sync/atomic" || p == "golang.org/x/sync/errgroup":
					t.Errorf("%s%s imports %s: it shares memory between goroutines; take it out of the Makefile's NORACE_PACKAGES", fset.Position(imp.Pos()), via, p)
				case strings.HasPrefix(p, module):
					check(strings.TrimPrefix(p, module), " (imported by "+pkg+via+")")
				}
			}
			ast.Inspect(f, func(n ast.Node) bool {
				if g, ok := n.(*ast.GoStmt); ok {
					t.Errorf("%s%s starts a goroutine; take the package out of the Makefile's NORACE_PACKAGES", fset.Position(g.Pos()), via)
				}
				return true
			})
		}
	}
	for _, p := range listed {
		check(strings.TrimPrefix(p, "./"), "")
	}
}
