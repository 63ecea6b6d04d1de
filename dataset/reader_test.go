package dataset

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"syscall"
	"testing"
	"time"
)

// threeFiles writes a glob of three JSONL files (named so that the directory
// order differs from nothing in particular) with blank lines and one bad row,
// and returns the glob. Physical rows: a.jsonl 0-2, b.jsonl 3-4, c.jsonl 5-7.
func threeFiles(t *testing.T) (dir, glob string) {
	dir = t.TempDir()
	writeFile(t, dir, "c.jsonl", sharegptLine("s", "human", "c0", "gpt", "x")+"\n"+
		sharegptLine("s", "human", "c1", "gpt", "x")+"\n"+
		sharegptLine("s", "human", "c2", "gpt", "x")) // no final newline
	writeFile(t, dir, "a.jsonl", sharegptLine("s", "human", "a0", "gpt", "x")+"\n\n  \n"+
		`{"conversations":[{"from":"human","value":false}]}`+"\n"+
		sharegptLine("s", "human", "a2", "gpt", "x")+"\r\n")
	writeFile(t, dir, "b.jsonl", "\n"+sharegptLine("s", "human", "b0", "gpt", "x")+"\n"+
		sharegptLine("s", "human", "b1", "gpt", "x")+"\n")
	writeFile(t, dir, "notes.txt", "not data")
	return dir, filepath.Join(dir, "*.jsonl")
}

func TestIDsAcrossGlob(t *testing.T) {
	dir, glob := threeFiles(t)
	ps, skipped := readAll(t, Options{Selection: Selection{Path: glob}})
	if want := []string{"0", "2", "3", "4", "5", "6", "7"}; !reflect.DeepEqual(ids(ps), want) {
		t.Errorf("ids = %v, want %v (sorted files, bad row 1 counted, blank lines not rows)", ids(ps), want)
	}
	var firsts []string
	for _, p := range ps {
		firsts = append(firsts, p.Messages[0].Content)
		if p.ID != fmt.Sprint(p.Index) {
			t.Errorf("id %q != index %d", p.ID, p.Index)
		}
	}
	if want := []string{"a0", "a2", "b0", "b1", "c0", "c1", "c2"}; !reflect.DeepEqual(firsts, want) {
		t.Errorf("prompts = %v, want %v", firsts, want)
	}
	// Line numbers count blank lines: a.jsonl's rows are on lines 1, 4, 5.
	wantLoc := map[string]string{"0": "a.jsonl:1", "2": "a.jsonl:5", "3": "b.jsonl:2", "7": "c.jsonl:3"}
	for _, p := range ps {
		if w, ok := wantLoc[p.ID]; ok && p.Location != filepath.Join(dir, w) {
			t.Errorf("id %s location = %q, want %q", p.ID, p.Location, filepath.Join(dir, w))
		}
	}
	if len(skipped) != 1 {
		t.Fatalf("skipped %d rows, want 1", len(skipped))
	}
	want := filepath.Join(dir, "a.jsonl") + ":4: conversations[0].value: not a string"
	if got := skipped[0].Error(); got != want {
		t.Errorf("skip reported %q, want %q", got, want)
	}
	if skipped[0].Row != 1 {
		t.Errorf("skipped row index = %d, want 1", skipped[0].Row)
	}
	n, err := Count(Options{Selection: Selection{Path: glob}})
	if err != nil || n != 8 {
		t.Errorf("Count = %d, %v; want 8 physical rows", n, err)
	}
}

func TestSkipAndFail(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "data.jsonl", strings.Join([]string{
		sharegptLine("s", "human", "ok0", "gpt", "x"),
		`{"conversations":[{"from":"human","value":["x"]}]}`,
		`{"conversations":[{"from":"gpt","value":"x"}`, // cut
		sharegptLine("s", "human", "ok3", "gpt", "x"),
	}, "\n"))
	wantErrs := []string{
		path + ":2: conversations[0].value: not a string",
		path + ":3: invalid JSON: unexpected end of line",
	}

	t.Run("skip", func(t *testing.T) {
		ps, skipped := readAll(t, Options{Selection: Selection{Path: path}, OnBadRow: "skip"})
		if want := []string{"0", "3"}; !reflect.DeepEqual(ids(ps), want) {
			t.Errorf("ids = %v, want %v", ids(ps), want)
		}
		var got []string
		for _, e := range skipped {
			got = append(got, e.Error())
		}
		if !reflect.DeepEqual(got, wantErrs) {
			t.Errorf("skipped:\n%q\nwant\n%q", got, wantErrs)
		}
	})

	t.Run("fail", func(t *testing.T) {
		r, err := Open(Options{Selection: Selection{Path: path}, OnBadRow: "fail"})
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if p, err := r.Next(); err != nil || p.ID != "0" {
			t.Fatalf("first Next = %q, %v", p.ID, err)
		}
		_, err = r.Next()
		var re *RowError
		if !errors.As(err, &re) || err.Error() != wantErrs[0] {
			t.Fatalf("Next = %v, want *RowError %q", err, wantErrs[0])
		}
		if re.Line != 2 || re.Row != 1 || re.Field != "conversations[0].value" || !errors.Is(err, ErrNotString) {
			t.Errorf("RowError = %+v", re)
		}
		if _, again := r.Next(); again != err {
			t.Errorf("Next after a failed row = %v, want the same error", again)
		}
		if r.Skipped() != 0 {
			t.Errorf("Skipped() = %d under fail", r.Skipped())
		}
	})
}

func TestLimit(t *testing.T) {
	_, glob := threeFiles(t)
	tests := []struct {
		limit int64
		ids   []string
		count int64
	}{
		{limit: 1, ids: []string{"0"}, count: 1},
		{limit: 2, ids: []string{"0"}, count: 2}, // row 1 is bad: Count ignores that
		{limit: 4, ids: []string{"0", "2", "3"}, count: 4},
		{limit: 6, ids: []string{"0", "2", "3", "4", "5"}, count: 6},
		{limit: 100, ids: []string{"0", "2", "3", "4", "5", "6", "7"}, count: 8},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.limit), func(t *testing.T) {
			ps, _ := readAll(t, Options{Selection: Selection{Path: glob, Limit: tt.limit}})
			if !reflect.DeepEqual(ids(ps), tt.ids) {
				t.Errorf("ids = %v, want %v", ids(ps), tt.ids)
			}
			if n, err := Count(Options{Selection: Selection{Path: glob, Limit: tt.limit}}); err != nil || n != tt.count {
				t.Errorf("Count = %d, %v; want %d", n, err, tt.count)
			}
		})
	}
}

// TestSharding checks that shards split the rows with none lost and none
// twice, that ids are the global ones, and that Count agrees with Next.
func TestSharding(t *testing.T) {
	dir := t.TempDir()
	var lines []string
	for i := range 10 {
		lines = append(lines, sharegptLine("s", "human", fmt.Sprint("q", i), "gpt", "a"))
	}
	writeFile(t, dir, "1.jsonl", strings.Join(lines[:4], "\n"))
	writeFile(t, dir, "2.jsonl.gz", strings.Join(lines[4:], "\n"))
	glob := filepath.Join(dir, "*")
	for _, limit := range []int64{0, 7} {
		for _, n := range []int{1, 2, 3, 4} {
			t.Run(fmt.Sprintf("limit%d/%dshards", limit, n), func(t *testing.T) {
				seen := map[string]int{}
				for s := range n {
					ps, _ := readAll(t, Options{Selection: Selection{Path: glob, Limit: limit, Shard: Shard{Index: s, Count: n}}})
					for _, p := range ps {
						seen[p.ID]++
						if p.Index%int64(n) != int64(s) {
							t.Errorf("shard %d/%d got row %d", s, n, p.Index)
						}
						if want := fmt.Sprint("q", p.Index); p.Messages[0].Content != want {
							t.Errorf("row %d prompt %q, want %q", p.Index, p.Messages[0].Content, want)
						}
					}
					c, err := Count(Options{Selection: Selection{Path: glob, Limit: limit, Shard: Shard{Index: s, Count: n}}})
					if err != nil || c != int64(len(ps)) {
						t.Errorf("shard %d/%d: Count = %d, %v; Next yielded %d", s, n, c, err, len(ps))
					}
				}
				total := 10
				if limit > 0 {
					total = int(limit)
				}
				for i := range total {
					if seen[fmt.Sprint(i)] != 1 {
						t.Errorf("row %d seen %d times over all shards", i, seen[fmt.Sprint(i)])
					}
				}
				if len(seen) != total {
					t.Errorf("%d distinct ids, want %d", len(seen), total)
				}
			})
		}
	}
}

// TestFileFormats reads the same rows from every text encoding.
func TestFileFormats(t *testing.T) {
	rows := []string{
		sharegptLine("MetaMath", "human", "q0", "gpt", "a"),
		`{"messages":[{"role":"user","content":"q1"}],"source":"m"}`,
		`{"prompt":"q2"}`,
	}
	jsonl := strings.Join(rows, "\n") + "\n"
	array := "\ufeff[\n  " + strings.Join(rows, ",\n  ") + "\n]\n"
	tests := []struct{ name, data string }{
		{"data.jsonl", jsonl},
		{"data.ndjson", jsonl},
		{"data.jsonl.gz", jsonl},
		{"data.jsonl.zst", jsonl},
		{"data.json", array},
		{"data.json.gz", array},
		{"data.json.zst", array},
		{"lines.json", jsonl}, // many ".json" files are JSON lines
		{"bom.jsonl", "\ufeff" + jsonl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeFile(t, t.TempDir(), tt.name, tt.data)
			ps, skipped := readAll(t, Options{Selection: Selection{Path: path}, OnBadRow: "fail"})
			if len(skipped) != 0 || len(ps) != 3 {
				t.Fatalf("%d prompts, %d skipped; want 3, 0", len(ps), len(skipped))
			}
			for i, p := range ps {
				if want := fmt.Sprint("q", i); p.ID != fmt.Sprint(i) || len(p.Messages) != 1 || !reflect.DeepEqual(p.Messages[0], u(want)) {
					t.Errorf("row %d = %+v", i, p)
				}
			}
			if n, err := Count(Options{Selection: Selection{Path: path}}); err != nil || n != 3 {
				t.Errorf("Count = %d, %v; want 3", n, err)
			}
		})
	}
}

func TestJSONArrayRows(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "data.json", `[{"prompt":"a"}, 42, {"prompt":"c"}]`)
	ps, skipped := readAll(t, Options{Selection: Selection{Path: path}})
	if !reflect.DeepEqual(ids(ps), []string{"0", "2"}) {
		t.Errorf("ids = %v", ids(ps))
	}
	if len(skipped) != 1 || skipped[0].Error() != path+":row 1: not a JSON object" {
		t.Errorf("skipped = %v", skipped)
	}
	if ps[1].Location != path+":row 2" {
		t.Errorf("location = %q", ps[1].Location)
	}

	// A syntax error loses the place in the stream: it ends the read with an
	// error naming the file and row, whatever the bad-row policy.
	cut := writeFile(t, dir, "cut.json", `[{"prompt":"a"}, {"prompt": }]`)
	r, err := Open(Options{Selection: Selection{Path: cut}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if _, err := r.Next(); err != nil {
		t.Fatal(err)
	}
	_, err = r.Next()
	if err == nil || !strings.Contains(err.Error(), cut+":row 1: invalid JSON") {
		t.Errorf("Next on a syntax error = %v", err)
	}
}

// TestLongLines reads rows far longer than the read buffer, and treats a line
// over the limit as a bad row that keeps its index.
func TestLongLines(t *testing.T) {
	big := strings.Repeat("é", 300_000) // 600 KB of UTF-8: rows of 1.2 MB, over the read buffer
	dir := t.TempDir()
	path := writeFile(t, dir, "big.jsonl", sharegptLine("s", "human", big, "gpt", big)+"\n"+
		sharegptLine("s", "human", "x"+big, "gpt", big)+"\n"+
		sharegptLine("s", "human", "small", "gpt", "a")+"\n")

	ps, _ := readAll(t, Options{Selection: Selection{Path: path}})
	if len(ps) != 3 || ps[0].Messages[0].Content != big || ps[2].Messages[0].Content != "small" {
		t.Fatalf("read %d prompts with the 1.2 MB rows damaged", len(ps))
	}

	old := maxLineBytes
	maxLineBytes = 1 << 20
	defer func() { maxLineBytes = old }()
	ps, skipped := readAll(t, Options{Selection: Selection{Path: path}})
	if !reflect.DeepEqual(ids(ps), []string{"2"}) {
		t.Errorf("ids = %v, want [2]", ids(ps))
	}
	if len(skipped) != 2 || skipped[1].Error() != path+":2: line too long: over 1048576 bytes" || !errors.Is(skipped[0], ErrLineTooLong) {
		t.Errorf("skipped = %v", skipped)
	}
	if n, err := Count(Options{Selection: Selection{Path: path}}); err != nil || n != 3 {
		t.Errorf("Count = %d, %v; want 3", n, err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "ok.jsonl", `{"prompt":"p"}`)
	writeFile(t, dir, "data.csv", "a,b")
	writeFile(t, dir, "x.parquet.gz", "no")
	writeFile(t, dir, "broken.parquet", "PAR1 not really")
	tests := []struct {
		name string
		opts Options
		want string // substring of the error
	}{
		{"glob matching nothing", Options{Selection: Selection{Path: filepath.Join(dir, "none-*.jsonl")}}, filepath.Join(dir, "none-*.jsonl") + ": no files match"},
		{"missing file", Options{Selection: Selection{Path: filepath.Join(dir, "nope.jsonl")}}, filepath.Join(dir, "nope.jsonl")},
		{"directory", Options{Selection: Selection{Path: dir}}, dir + ": is a directory"},
		{"unsupported type", Options{Selection: Selection{Path: filepath.Join(dir, "data.csv")}}, "data.csv: unsupported file type"},
		{"compressed parquet", Options{Selection: Selection{Path: filepath.Join(dir, "x.parquet.gz")}}, "compressed parquet"},
		{"not parquet", Options{Selection: Selection{Path: filepath.Join(dir, "broken.parquet")}}, "broken.parquet: not a readable parquet file"},
		{"bad format", Options{Selection: Selection{Path: good, Format: "csv"}}, `format "csv"`},
		{"bad policy", Options{Selection: Selection{Path: good}, OnBadRow: "ignore"}, `on_bad_row "ignore"`},
		{"shard out of range", Options{Selection: Selection{Path: good, Shard: Shard{Index: 3, Count: 3}}}, "shard 3/3"},
		{"shard without shards", Options{Selection: Selection{Path: good, Shard: Shard{Index: 1}}}, "shard 1/0"},
		{"negative limit", Options{Selection: Selection{Path: good, Limit: -1}}, "limit -1"},
		{"empty path", Options{}, "no path"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r, err := Open(tt.opts)
			if err == nil {
				r.Close()
				t.Fatalf("Open succeeded, want error containing %q", tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Open error %q does not contain %q", err, tt.want)
			}
			if _, err := Count(tt.opts); err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Count error %v does not contain %q", err, tt.want)
			}
		})
	}
}

func TestCorruptGzipIsAnError(t *testing.T) {
	dir := t.TempDir()
	path := writeFile(t, dir, "data.jsonl.gz", strings.Repeat(`{"prompt":"p"}`+"\n", 1000))
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, b[:len(b)/2], 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := Open(Options{Selection: Selection{Path: path}})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	for {
		_, err = r.Next()
		if err != nil {
			break
		}
	}
	if err == io.EOF || !strings.Contains(err.Error(), path) {
		t.Errorf("a cut gzip stream ended with %v, want an error naming %s", err, path)
	}
}

// TestSample reads the shipped example in the open-perfectblend shape.
func TestSample(t *testing.T) {
	path := filepath.Join("..", "examples", "data", "sample.jsonl")
	ps, skipped := readAll(t, Options{Selection: Selection{Path: path}, OnBadRow: "fail"})
	if len(ps) != 300 || len(skipped) != 0 {
		t.Fatalf("%d prompts, %d skipped; want 300, 0", len(ps), len(skipped))
	}
	sources := map[string]bool{}
	multi, system := 0, 0
	for _, p := range ps {
		sources[p.Source] = true
		last := p.Messages[len(p.Messages)-1]
		if last.Role != "user" || last.Content == "" {
			t.Errorf("row %s does not end in a user turn: %+v", p.ID, p.Messages)
		}
		if p.Messages[0].Role == "system" {
			system++
		}
	}
	if len(sources) < 6 {
		t.Errorf("%d distinct sources, want a mix", len(sources))
	}
	if system == 0 {
		t.Error("no row with a system turn")
	}
	// Multi-turn rows become single-turn prompts: count them in the raw file.
	raw, _ := os.ReadFile(path)
	for _, line := range strings.Split(string(raw), "\n") {
		if strings.Count(line, `"from":"human"`) > 1 {
			multi++
		}
	}
	if multi == 0 {
		t.Error("no multi-turn row in the sample")
	}
	if n, err := Count(Options{Selection: Selection{Path: path}}); err != nil || n != 300 {
		t.Errorf("Count = %d, %v", n, err)
	}
}

// TestNotARegularFile: a FIFO, or a link to a device that never ends, is
// refused at once by name, instead of hanging the count at start.
func TestNotARegularFile(t *testing.T) {
	dir := t.TempDir()
	fifo := filepath.Join(dir, "rows.jsonl")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("cannot make a FIFO here: %v", err)
	}
	zero := filepath.Join(dir, "zero.jsonl")
	if err := os.Symlink("/dev/zero", zero); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{fifo, zero} {
		done := make(chan error, 1)
		go func() {
			_, err := Count(Options{Selection: Selection{Path: path}})
			done <- err
		}()
		select {
		case err := <-done:
			if err == nil || !strings.Contains(err.Error(), "not a regular file") || !strings.Contains(err.Error(), path) {
				t.Errorf("%s: Count = %v, want a refusal naming it", path, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s: Count still reading after 30 s: it must refuse at once", path)
		}
	}
}
