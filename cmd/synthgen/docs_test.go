package main

import (
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/synthgen/synthgen/config"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/sink"
)

// docPages reads every Markdown page a user reads: README.md, ARCHITECTURE.md
// and everything under docs/, by path relative to the repository's root.
func docPages(t *testing.T) map[string]string {
	t.Helper()
	root := filepath.Join("..", "..")
	pages := map[string]string{}
	for _, f := range []string{"README.md", "ARCHITECTURE.md"} {
		b, err := os.ReadFile(filepath.Join(root, f))
		if err != nil {
			t.Fatal(err)
		}
		pages[f] = string(b)
	}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(path, ".md") {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, path)
		pages[filepath.ToSlash(rel)] = string(b)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return pages
}

// TestDocsNameEveryRunFlag: every flag `synthgen run --help` lists is named in
// docs/, so a person who meets one in the help finds what it does. The
// flags come from the command itself; a config key must also be named in a
// guide page, not only in the generated docs/config.md, so that each is
// explained where a person meets it.
func TestDocsNameEveryRunFlag(t *testing.T) {
	t.Parallel()
	pages := docPages(t)
	var all, guide strings.Builder
	for path, text := range pages {
		if !strings.HasPrefix(path, "docs/") {
			continue
		}
		all.WriteString(text)
		if path != "docs/config.md" {
			guide.WriteString(text)
		}
	}
	isKey := map[string]bool{}
	for _, k := range config.Keys() {
		isKey[k] = true
	}
	n := 0
	newRunCmd().Flags().VisitAll(func(f *pflag.Flag) {
		if f.Name == "help" {
			return
		}
		n++
		if isKey[f.Name] {
			if !named(all.String(), f.Name) {
				t.Errorf("run --help's key %s is named nowhere in docs/ (make docs regenerates docs/config.md)", f.Name)
			}
			if !named(guide.String(), f.Name) {
				t.Errorf("run --help's key %s is named only in the generated docs/config.md: say where it matters in a guide page", f.Name)
			}
			return
		}
		if !strings.Contains(all.String(), "`--"+f.Name) {
			t.Errorf("run --help's flag --%s is named nowhere in docs/ (docs/reference.md lists the flags that are not keys)", f.Name)
		}
	})
	if n < len(config.Keys()) {
		t.Fatalf("run has %d flags, fewer than the %d config keys: the flag set is not the command's", n, len(config.Keys()))
	}
}

// named reports whether text names a key as a person writes it: in
// backticks, alone or with a value (`generation.n: 1`), or as a flag.
func named(text, key string) bool {
	return regexp.MustCompile("`(--)?" + regexp.QuoteMeta(key) + "[`:= ]").MatchString(text)
}

// TestDocsLinksResolve: every relative link of README.md, ARCHITECTURE.md and
// docs/ names a file that exists, and an anchor names a heading of its page
// (as a code host makes its anchors), so a page moved or a heading renamed
// cannot leave a reader at a dead link.
func TestDocsLinksResolve(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	pages := docPages(t)
	link := regexp.MustCompile(`\]\(([^)\s]+)\)`)
	for path, text := range pages {
		for _, m := range link.FindAllStringSubmatch(stripCode(text), -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			file, anchor, _ := strings.Cut(target, "#")
			resolved := path
			if file != "" {
				resolved = filepath.ToSlash(filepath.Join(filepath.Dir(path), file))
				if _, err := os.Stat(filepath.Join(root, resolved)); err != nil {
					t.Errorf("%s: link %q: no file %s", path, target, resolved)
					continue
				}
			}
			if anchor == "" {
				continue
			}
			page, ok := pages[resolved]
			if !ok {
				b, err := os.ReadFile(filepath.Join(root, resolved))
				if err != nil {
					t.Errorf("%s: link %q: %v", path, target, err)
					continue
				}
				page = string(b)
			}
			if !anchors(page)[anchor] {
				t.Errorf("%s: link %q: %s has no heading with the anchor #%s", path, target, resolved, anchor)
			}
		}
	}
}

// stripCode blanks fenced code blocks, whose text is no link.
func stripCode(text string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			in = !in
			continue
		}
		if !in {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}

// anchors lists the anchors a code host gives a page's headings: lowercase,
// punctuation but - and _ dropped, spaces as -, a repeat suffixed -1, -2.
func anchors(page string) map[string]bool {
	out := map[string]bool{}
	drop := regexp.MustCompile(`[^\p{L}\p{N} _-]`)
	for _, line := range strings.Split(stripCode(page), "\n") {
		title, ok := strings.CutPrefix(line, "#")
		if !ok {
			continue
		}
		title = strings.TrimSpace(strings.TrimLeft(title, "#"))
		slug := strings.ReplaceAll(drop.ReplaceAllString(strings.ToLower(title), ""), " ", "-")
		a := slug
		for i := 1; out[a]; i++ {
			a = slug + "-" + strconv.Itoa(i)
		}
		out[a] = true
	}
	return out
}

// TestDocsStayShort: the README is a door and ARCHITECTURE.md a map (issues
// 28 and 29); what grows goes to a page of docs/ or docs/decisions/. Words
// are counted as wc -w counts them.
func TestDocsStayShort(t *testing.T) {
	t.Parallel()
	pages := docPages(t)
	for page, most := range map[string]int{"README.md": 2000, "ARCHITECTURE.md": 4500} {
		if n := len(strings.Fields(pages[page])); n >= most {
			t.Errorf("%s is %d words, the bound is under %d: move the detail to docs/", page, n, most)
		}
	}
	links := regexp.MustCompile(`\]\(docs/[^)#]+\.md`).FindAllString(pages["README.md"], -1)
	if len(links) < 4 {
		t.Errorf("README.md links %d pages of docs/, want the guide's pages linked", len(links))
	}
}

// foreignFlags are other programs' flags the pages name: vLLM's and SGLang's
// server flags, Slurm's, SpecForge's validator's, speculators' trainer's.
var foreignFlags = map[string]bool{
	"reasoning-parser": true, "grammar-backend": true, // vLLM, SGLang
	"speculative-config": true, "kv-transfer-config": true, // vLLM's hidden-state extraction
	"gpu-memory-utilization": true, "enable-prefix-caching": true, "disable-radix-cache": true, // the prefix cache
	"array": true, "signal": true, "requeue": true, // sbatch
	"expect-reasoning": true, "strict-think-markers": true, // validate_regenerated_data.py
	"data-path": true, "d2t-path": true, "t2d-path": true, // speculators' scripts/train.py
}

// TestDocsFlagsExist: a flag the pages name (`--name` in backticks) is a flag
// of one of synthgen's commands, built from the code, or another program's
// listed above: a flag renamed or removed leaves no page naming it.
func TestDocsFlagsExist(t *testing.T) {
	t.Parallel()
	ours := map[string]bool{}
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		c.Flags().VisitAll(func(f *pflag.Flag) { ours[f.Name] = true })
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(newRootCmd())
	flag := regexp.MustCompile("`--([a-z0-9][a-z0-9._-]*)")
	for path, text := range docPages(t) {
		if strings.HasPrefix(path, "docs/decisions/") {
			continue // dated notes: the flags as they were then
		}
		for _, m := range flag.FindAllStringSubmatch(text, -1) {
			if strings.HasSuffix(m[1], "-") {
				continue // a family, `--rate-*`
			}
			if !ours[m[1]] && !foreignFlags[m[1]] {
				t.Errorf("%s names --%s, which no synthgen command has", path, m[1])
			}
		}
	}
}

// TestReferenceIsTheCode: docs/reference.md names every field of the record,
// a turn, the logprobs and the error record as the code writes them (their
// json names), and its exit-code table is the code's exit codes, each once:
// the interfaces users' scripts read cannot change without that page.
func TestReferenceIsTheCode(t *testing.T) {
	t.Parallel()
	page := docPages(t)["docs/reference.md"]
	for _, typ := range []reflect.Type{reflect.TypeFor[sink.Record](), reflect.TypeFor[sink.Turn](), reflect.TypeFor[sink.Logprobs](), reflect.TypeFor[sink.ErrorRecord]()} {
		for f := range typ.Fields() {
			name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
			if name == "" || name == "-" {
				continue
			}
			if !regexp.MustCompile(`\b` + regexp.QuoteMeta(name) + `\b`).MatchString(page) {
				t.Errorf("docs/reference.md does not name %s's field %s", typ.Name(), name)
			}
		}
	}
	_, table, _ := strings.Cut(page, "\n## Exit codes\n")
	table, _, _ = strings.Cut(table, "\n## ")
	var rows []int
	for _, m := range regexp.MustCompile(`(?m)^\| (\d+) \|`).FindAllStringSubmatch(table, -1) {
		n, _ := strconv.Atoi(m[1])
		rows = append(rows, n)
	}
	codes := []int{exitOK, exitFailure, exitUsage, exitIncomplete, exitPending, exitInterrupted}
	if !slices.Equal(rows, codes) {
		t.Errorf("docs/reference.md's exit codes are %v, the code's %v", rows, codes)
	}
}

// TestReferenceNamesEveryMetric: every metric --metrics-addr can serve (the
// collector's own descriptors) is named in docs/reference.md.
func TestReferenceNamesEveryMetric(t *testing.T) {
	t.Parallel()
	page := docPages(t)["docs/reference.md"]
	ch := make(chan *prometheus.Desc, 64)
	runstats.NewCollector(runstats.NewStats(time.Now)).Describe(ch)
	close(ch)
	name := regexp.MustCompile(`fqName: "([^"]+)"`)
	n := 0
	for d := range ch {
		m := name.FindStringSubmatch(d.String())
		if m == nil {
			t.Fatalf("no name in %s", d)
		}
		n++
		if !strings.Contains(page, "`"+m[1]) {
			t.Errorf("docs/reference.md does not name the metric %s", m[1])
		}
	}
	if n == 0 {
		t.Fatal("the collector describes no metric")
	}
}

// TestDocsPathsExist: a repository path a user's page puts in backticks
// (`examples/qa-keep.sql`, `cmd/synthgen/shards_test.go`) exists, and a test
// it names (`TestFaultSoak`) is declared: those pages send a reader to them.
func TestDocsPathsExist(t *testing.T) {
	t.Parallel()
	root := filepath.Join("..", "..")
	c := readCodeNames(t)
	testName := regexp.MustCompile(`^(Test|Fuzz|Benchmark)[A-Z]\w*$`)
	// What .gitignore names at the top (out/, bin/) is what runs write,
	// there after `make run` or not: no path under it is the repository's.
	ignored := map[string]bool{}
	if gi, err := os.ReadFile(filepath.Join(root, ".gitignore")); err == nil {
		for _, line := range strings.Split(string(gi), "\n") {
			if d, ok := strings.CutPrefix(strings.TrimSpace(line), "/"); ok {
				ignored[strings.TrimSuffix(d, "/")] = true
			}
		}
	}
	for path, text := range docPages(t) {
		if path == "ARCHITECTURE.md" || strings.HasPrefix(path, "docs/decisions/") {
			continue // ARCHITECTURE.md: TestArchitectureNamesAreTheCode; decisions: dated notes
		}
		for _, m := range spanInDoc.FindAllStringSubmatch(stripCode(text), -1) {
			s := m[1]
			switch {
			case testName.MatchString(s):
				if !c.all[s] {
					t.Errorf("%s names the test %s, which the code does not declare", path, s)
				}
			case filePath.MatchString(s) && strings.Contains(s, "/"):
				first, _, _ := strings.Cut(s, "/")
				if st, err := os.Stat(filepath.Join(root, first)); err != nil || !st.IsDir() || ignored[first] {
					continue // DIR/errors/, data/train-*.parquet, out/run: not the repository's
				}
				if m, _ := filepath.Glob(filepath.Join(root, filepath.FromSlash(strings.TrimSuffix(s, "/")))); len(m) == 0 {
					t.Errorf("%s names %s, which is not in the repository", path, s)
				}
			}
		}
	}
}

// TestRecipesQueryIsTheExample: the query docs/recipes.md shows is the one
// examples/qa-keep.sql runs (TestWorkedPipeline runs that file).
func TestRecipesQueryIsTheExample(t *testing.T) {
	t.Parallel()
	_, block, ok := strings.Cut(docPages(t)["docs/recipes.md"], "```sql\n")
	block, _, _ = strings.Cut(block, "```")
	if !ok {
		t.Fatal("docs/recipes.md shows no sql block")
	}
	file, err := os.ReadFile(filepath.Join("..", "..", "examples", "qa-keep.sql"))
	if err != nil {
		t.Fatal(err)
	}
	var query []string
	for _, line := range strings.Split(string(file), "\n") {
		if !strings.HasPrefix(line, "--") {
			query = append(query, line)
		}
	}
	if got, want := strings.TrimSpace(block), strings.TrimSpace(strings.Join(query, "\n")); got != want {
		t.Errorf("docs/recipes.md's query:\n%s\nexamples/qa-keep.sql's:\n%s", got, want)
	}
}

// TestDocsCommandsParse: every `synthgen ...` line of a page's code blocks
// (continued lines joined, cut at a pipe, `&&`, `;` or a redirection) names a
// command and flags that command parses: a shorthand it does not have (-c)
// or a flag given to the wrong command fails here, not in a reader's shell.
func TestDocsCommandsParse(t *testing.T) {
	t.Parallel()
	fence := regexp.MustCompile("(?s)```[a-z]*\n(.*?)```")
	n := 0
	for path, text := range docPages(t) {
		if strings.HasPrefix(path, "docs/decisions/") {
			continue
		}
		for _, block := range fence.FindAllStringSubmatch(text, -1) {
			for _, line := range strings.Split(strings.ReplaceAll(block[1], "\\\n", " "), "\n") {
				line = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(line), "$ "))
				line = strings.TrimPrefix(line, "nohup ")
				if !strings.HasPrefix(line, "synthgen ") {
					continue
				}
				if i := strings.IndexAny(line, "|;&>#<"); i >= 0 {
					line = line[:i]
				}
				words, err := shellWords(line)
				if err != nil {
					t.Errorf("%s: %v", path, err)
					continue
				}
				n++
				cmd, rest, err := newRootCmd().Find(words[1:])
				if err == nil {
					err = cmd.ParseFlags(rest)
				}
				if err != nil {
					t.Errorf("%s: %q: %v", path, line, err)
				}
			}
		}
	}
	if n < 10 {
		t.Errorf("%d synthgen command lines in the pages' code blocks; the reading of the blocks is broken", n)
	}
}

// TestDocsGuideNamesHostedBatchAndPrice: the guide's entry for hosted
// endpoints (docs/README.md) names what a person looking to pay less
// there looks for: the provider's batch API and endpoint.price (issue 41).
func TestDocsGuideNamesHostedBatchAndPrice(t *testing.T) {
	guide := docPages(t)["docs/README.md"]
	_, entry, ok := strings.Cut(guide, "[Hosted endpoints](hosted.md)")
	if !ok {
		t.Fatal("docs/README.md does not link hosted.md as Hosted endpoints")
	}
	// The entry runs to the next numbered one.
	if i := regexp.MustCompile(`\n\d+\. `).FindStringIndex(entry); i != nil {
		entry = entry[:i[0]]
	}
	for _, want := range []string{"batch API", "`batch.enabled`", "`endpoint.price`"} {
		if !strings.Contains(entry, want) {
			t.Errorf("docs/README.md's hosted endpoints entry does not name %s:\n%s", want, entry)
		}
	}
}
