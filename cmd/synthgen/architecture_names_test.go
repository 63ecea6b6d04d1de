package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/config"
)

// codeNames is what the module's Go files declare, tests included: each
// package's top-level names, each type's methods and fields, the files,
// and the names under which other packages are imported.
type codeNames struct {
	pkgs    map[string]map[string]bool // package name -> its top-level names
	members map[string]map[string]bool // type name -> its methods and fields (any package)
	all     map[string]bool            // every top-level name and member
	files   map[string]bool            // every file's base name
	imports map[string]bool            // the names imported packages are used by (http, openai)
}

// readCodeNames parses the module (from the repository's root) once for
// every test that asks.
func readCodeNames(t *testing.T) codeNames {
	t.Helper()
	c, err := parsedCodeNames()
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var parsedCodeNames = sync.OnceValues(func() (codeNames, error) {
	return parseCodeNames(filepath.Join("..", ".."))
})

func parseCodeNames(root string) (codeNames, error) {
	c := codeNames{pkgs: map[string]map[string]bool{}, members: map[string]map[string]bool{}, all: map[string]bool{}, files: map[string]bool{}, imports: map[string]bool{}}
	member := func(typ, name string) {
		if c.members[typ] == nil {
			c.members[typ] = map[string]bool{}
		}
		c.members[typ][name] = true
		c.all[name] = true
	}
	err := filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (strings.HasPrefix(d.Name(), ".") || d.Name() == "node_modules") && p != root {
			return filepath.SkipDir
		}
		if d.IsDir() {
			return nil
		}
		c.files[d.Name()] = true
		if strings.HasSuffix(p, ".js") && !strings.Contains(d.Name(), ".min.") {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			for _, m := range jsFunction.FindAllStringSubmatch(string(b), -1) {
				c.all[m[1]] = true // the view's script: drawHistory
			}
			return nil
		}
		if !strings.HasSuffix(p, ".go") || strings.Contains(filepath.ToSlash(p), "/testdata/") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), p, nil, parser.SkipObjectResolution)
		if err != nil {
			return err
		}
		pkg := f.Name.Name
		if pkg == "main" {
			rel, _ := filepath.Rel(root, filepath.Dir(p))
			pkg = filepath.Base(rel) // cmd/synthgen, bench: named by their directory
		}
		if c.pkgs[pkg] == nil {
			c.pkgs[pkg] = map[string]bool{}
		}
		top := func(name string) { c.pkgs[pkg][name] = true; c.all[name] = true }
		for _, imp := range f.Imports {
			ip, _ := strconv.Unquote(imp.Path.Value)
			name := path.Base(ip)
			if imp.Name != nil {
				name = imp.Name.Name
			}
			c.imports[name] = true
		}
		for _, decl := range f.Decls {
			switch d := decl.(type) {
			case *ast.FuncDecl:
				if d.Recv == nil {
					top(d.Name.Name)
					continue
				}
				member(receiverType(d.Recv.List[0].Type), d.Name.Name)
			case *ast.GenDecl:
				for _, spec := range d.Specs {
					switch s := spec.(type) {
					case *ast.TypeSpec:
						top(s.Name.Name)
						typeMembers(s, member)
					case *ast.ValueSpec:
						for _, n := range s.Names {
							top(n.Name)
						}
					}
				}
			}
		}
		return nil
	})
	return c, err
}

// receiverType names a method's receiver type: T of (t *T) or (t T[K]).
func receiverType(e ast.Expr) string {
	switch x := e.(type) {
	case *ast.StarExpr:
		return receiverType(x.X)
	case *ast.IndexExpr:
		return receiverType(x.X)
	case *ast.IndexListExpr:
		return receiverType(x.X)
	case *ast.Ident:
		return x.Name
	}
	return ""
}

// typeMembers records a struct's fields (an embedded one by its type's
// name) and an interface's methods.
func typeMembers(s *ast.TypeSpec, member func(typ, name string)) {
	var fields *ast.FieldList
	switch x := s.Type.(type) {
	case *ast.StructType:
		fields = x.Fields
	case *ast.InterfaceType:
		fields = x.Methods
	}
	if fields == nil {
		return
	}
	for _, f := range fields.List {
		for _, n := range f.Names {
			member(s.Name.Name, n.Name)
		}
		if len(f.Names) == 0 {
			if n := receiverType(f.Type); n != "" {
				member(s.Name.Name, n)
			} else if sel, ok := f.Type.(*ast.SelectorExpr); ok {
				member(s.Name.Name, sel.Sel.Name)
			} else if st, ok := f.Type.(*ast.StarExpr); ok {
				if sel, ok := st.X.(*ast.SelectorExpr); ok {
					member(s.Name.Name, sel.Sel.Name)
				}
			}
		}
	}
}

var (
	goChain   = regexp.MustCompile(`^[A-Za-z_]\w*(\.[A-Za-z_]\w*)+$`)
	goIdent   = regexp.MustCompile(`^[A-Za-z_]\w*$`)
	filePath  = regexp.MustCompile(`^[\w.*-]+(/[\w.*-]+)*/?$`)
	spanInDoc = regexp.MustCompile("`([^`\n]+)`")
	// jsFunction finds a script's named functions, which the page names too.
	jsFunction = regexp.MustCompile(`\bfunction\s+([A-Za-z_]\w*)`)
)

// fileSuffixes end a backticked name that is a file (status.json), not Go.
var fileSuffixes = []string{"go", "json", "jsonl", "parquet", "md", "yaml", "txt", "open", "journal", "tmp", "sh", "sql", "js", "lock"}

// checkArchitectureName says what is wrong with one backticked span of
// ARCHITECTURE.md, or "" when it names what the code has (or is no Go name
// nor path of the repository: a config key, a command, a JSON field).
func checkArchitectureName(root string, c codeNames, keys map[string]bool, span string) string {
	s := strings.TrimSuffix(strings.TrimLeft(span, "*&"), "()")
	if keys[s] {
		return ""
	}
	last := s[strings.LastIndex(s, ".")+1:]
	if filePath.MatchString(s) && (strings.Contains(s, "/") || strings.HasSuffix(s, ".go")) {
		first, _, _ := strings.Cut(s, "/")
		if st, err := os.Stat(filepath.Join(root, first)); !strings.Contains(s, "/") || (err == nil && st.IsDir()) {
			if !strings.Contains(s, "/") {
				if !c.files[s] {
					return "no file of the repository is named " + s
				}
				return ""
			}
			if m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(s, "/")))); len(m) == 0 {
				return "no such file or directory in the repository"
			}
		}
		return ""
	}
	if goChain.MatchString(s) {
		if slices.Contains(fileSuffixes, last) {
			return ""
		}
		parts := strings.Split(s, ".")
		x, rest := parts[0], parts[1:]
		switch {
		case c.pkgs[x] != nil:
			if !c.pkgs[x][rest[0]] {
				return "package " + x + " declares no " + rest[0]
			}
			if len(rest) > 1 && !c.members[rest[0]][rest[1]] {
				return rest[0] + " has no method or field " + rest[1]
			}
		case c.members[x] != nil:
			if !c.members[x][rest[0]] {
				return x + " has no method or field " + rest[0]
			}
		case c.imports[x]:
			// another module's name (http.Client, openai.APIError)
		case c.pkgs[x] == nil && c.members[x] == nil && c.all[x]:
			// a function or a value followed by its member: not checked further
		default:
			return x + " is no package, type or import of the code"
		}
		return ""
	}
	if goIdent.MatchString(s) && strings.ToLower(s) != s && strings.ToUpper(s) != s && !c.all[s] {
		return "the code declares no " + s
	}
	return ""
}

// TestArchitectureNamesAreTheCode: every Go name and repository path that
// ARCHITECTURE.md puts in backticks exists in the code: `pkg.Name` is a
// top-level name of that package, `Type.Method` (or a field) a member of
// that type, `Name` in mixed case declared somewhere, `file.go` a file and
// `dir/file.go` that path. A name gone in a refactor fails here, named.
func TestArchitectureNamesAreTheCode(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	doc, err := os.ReadFile(filepath.Join(root, "ARCHITECTURE.md"))
	if err != nil {
		t.Fatal(err)
	}
	c := readCodeNames(t)
	keys := map[string]bool{}
	for _, k := range config.Keys() {
		keys[k] = true
	}
	checked := 0
	for i, line := range strings.Split(stripCode(string(doc)), "\n") {
		for _, m := range spanInDoc.FindAllStringSubmatch(line, -1) {
			checked++
			if why := checkArchitectureName(root, c, keys, m[1]); why != "" {
				t.Errorf("ARCHITECTURE.md: `%s`: %s (near line %d outside code blocks)", m[1], why, i+1)
			}
		}
	}
	if checked < 100 {
		t.Fatalf("only %d backticked names read from ARCHITECTURE.md: the reader is broken", checked)
	}
}

// TestArchitectureNamesCheck: the checker itself tells a name the code has
// from one it has not, so that a pass of the test above means something.
func TestArchitectureNamesCheck(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	c := readCodeNames(t)
	keys := map[string]bool{"generation.n": true}
	for span, ok := range map[string]bool{
		"sink.Open": true, "*sink.Record": true, "keyset.Set": true, "Runner.Run": true,
		"sink/format.go": true, "format.go": true, "generator/pool": true, "http.Client": true,
		"generation.n": true, "DIR/manifest.json": true, "status.json": true, "stop": true,
		"sink.KeySet": false, "sink.NoSuchThing": false, "Runner.NoSuchMethod": false,
		"noSuchFile.go": false, "sink/nosuch.go": false, "NoSuchName": false, "nosuchpkg.Name": false,
	} {
		if got := checkArchitectureName(root, c, keys, span) == ""; got != ok {
			t.Errorf("`%s`: accepted %v, want %v", span, got, ok)
		}
	}
}
