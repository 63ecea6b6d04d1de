package export

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/audit"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var fixtureJob = job.Job{
	Selection: dataset.Selection{Path: "prompts.jsonl", Format: "auto"},
	Prompt:    job.Prompting{SystemPrompt: "Be brief."},
	Sampling:  job.Sampling{Model: "qwen3-8b", MaxTokens: 64, Temperature: 0.6, TopP: 0.95, Samples: 2},
}

// fixtureRecords are the records of the golden directory, in the order a
// run could have written them (not id order): two samples per id, one with
// reasoning and one without, and one record for each filter.
func fixtureRecords() []*sink.Record {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	msgs := func(q string) []chat.Message {
		return []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: q}}
	}
	rec := func(id string, sample int, content, reasoning, finish string) *sink.Record {
		return &sink.Record{ID: id, Sample: sample, Messages: msgs("question " + id), Content: content, Reasoning: reasoning,
			FinishReason: finish, Model: "qwen3-8b", PromptTokens: 12, CompletionTokens: 10 + len(content) + len(reasoning),
			Attempts: 1, CreatedAt: at}
	}
	return []*sink.Record{
		rec("10", 1, "Ten, again.", "", "stop"),
		rec("2", 0, "Two <b>&</b>.", "Two is small.", "stop"),
		rec("10", 0, "Ten.", "Ten is two digits.\nSo: ten.", "stop"),
		rec("2", 1, "Two, cut", "Thinking about two and", "length"),
		rec("1", 0, "   ", "Only reasoning, no answer.", "stop"),
		rec("1", 1, "<think>leak</think>One.", "", "stop"),
		rec("3", 0, "Three.", "Three is odd.", "stop"),
	}
}

// fixtureDir writes the golden output directory with the real sink: the
// records above and one request that failed for good (id 4, sample 0).
func fixtureDir(t *testing.T, format string) string {
	t.Helper()
	dir, s := openDir(t, format, 3)
	for _, r := range fixtureRecords() {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.WriteError(&sink.ErrorRecord{ID: "4", Status: 400, Message: "prompt too long", Attempts: 1, Cause: "http_400"}); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openDir opens a new output directory of fixtureJob with the real sink,
// parts of partSize records.
func openDir(t *testing.T, format string, partSize int) (string, *sink.Sink) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "out")
	spec, err := json.Marshal(fixtureJob)
	if err != nil {
		t.Fatal(err)
	}
	s, err := sink.Open(sink.Options{Dir: dir, Format: format, PartSize: partSize,
		Job: sink.JobRecord{Version: "v1.2.3", Spec: spec, Hash: fixtureJob.Hash()}})
	if err != nil {
		t.Fatal(err)
	}
	return dir, s
}

// writeDir writes recs to a new output directory of fixtureJob.
func writeDir(t *testing.T, format string, partSize int, recs ...*sink.Record) string {
	t.Helper()
	dir, s := openDir(t, format, partSize)
	for _, r := range recs {
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

// options are the export of dirs (checked with the real Inspect) to out.
func options(t *testing.T, format, out string, dirs ...string) Options {
	t.Helper()
	var reps []*audit.Audit
	for _, d := range dirs {
		r, err := audit.Dir(d)
		if err != nil {
			t.Fatal(err)
		}
		if !r.OK() {
			t.Fatalf("%s: %v", d, r.Problems)
		}
		reps = append(reps, r)
	}
	rep := reps[0]
	if len(reps) > 1 {
		var err error
		if rep, err = audit.Combine(reps...); err != nil {
			t.Fatal(err)
		}
	}
	return Options{Format: format, Out: out, Report: rep, Dirs: dirs, Job: fixtureJob, Version: "v1.2.3"}
}

func run(t *testing.T, o Options) *Summary {
	t.Helper()
	s, err := Run(context.Background(), o)
	if err != nil {
		t.Fatalf("export %s: %v", o.Format, err)
	}
	return s
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to write it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the export (go test -update rewrites it):\n--- got\n%s\n--- want\n%s", path, got, want)
	}
}

// TestGolden: each format of the fixture, byte for byte, from JSONL and
// from Parquet shards alike.
func TestGolden(t *testing.T) {
	cases := []struct {
		name string
		o    func(*Options)
	}{
		{"specforge", func(o *Options) { o.Format = FormatSpecForge }},
		{"specforge_inline", func(o *Options) { o.Format, o.Reasoning = FormatSpecForge, ReasoningInline }},
		{"sharegpt", func(o *Options) { o.Format = FormatShareGPT }},
		{"sharegpt_inline", func(o *Options) { o.Format, o.Reasoning = FormatShareGPT, ReasoningInline }},
		{"messages", func(o *Options) { o.Format = FormatMessages }},
		{"messages_drop", func(o *Options) { o.Format, o.Reasoning = FormatMessages, ReasoningDrop }},
		{"openai_batch", func(o *Options) { o.Format, o.IncludeErrors = FormatOpenAIBatch, true }},
	}
	dirs := map[string]string{sink.FormatJSONL: fixtureDir(t, sink.FormatJSONL), sink.FormatParquet: fixtureDir(t, sink.FormatParquet)}
	for _, c := range cases {
		for _, shards := range []string{sink.FormatJSONL, sink.FormatParquet} {
			t.Run(c.name+"/"+shards, func(t *testing.T) {
				out := filepath.Join(t.TempDir(), "train.jsonl")
				o := options(t, "", out, dirs[shards])
				c.o(&o)
				run(t, o)
				got, err := os.ReadFile(out)
				if err != nil {
					t.Fatal(err)
				}
				golden(t, c.name+".jsonl", got)
			})
		}
	}
}

// TestFiltersCount: each filter drops its record and counts it; turning a
// filter off keeps its record; errors are counted, never rows.
func TestFiltersCount(t *testing.T) {
	dir := fixtureDir(t, sink.FormatJSONL)
	dropped := func(s *Summary) map[string]int64 {
		m := map[string]int64{}
		for _, f := range s.Filters {
			if f.Active {
				m[f.Name] = f.Dropped
			}
		}
		return m
	}
	s := run(t, options(t, FormatSpecForge, filepath.Join(t.TempDir(), "a.jsonl"), dir))
	if got, want := dropped(s), map[string]int64{FilterTruncated: 1, FilterEmpty: 1, FilterThinkTags: 1, FilterSpecForge: 0}; !maps.Equal(got, want) {
		t.Errorf("dropped %v, want %v", got, want)
	}
	if s.Read != 7 || s.Exported != 4 || s.Failed != 1 || s.ErrorLines != 0 {
		t.Errorf("read %d exported %d failed %d error lines %d, want 7 4 1 0", s.Read, s.Exported, s.Failed, s.ErrorLines)
	}
	o := options(t, FormatSpecForge, filepath.Join(t.TempDir(), "b.jsonl"), dir)
	o.KeepTruncated, o.KeepThinkTags = true, true
	s = run(t, o)
	if got, want := dropped(s), map[string]int64{FilterEmpty: 1, FilterSpecForge: 0}; !maps.Equal(got, want) || s.Exported != 6 {
		t.Errorf("with --keep-*: dropped %v exported %d, want %v and 6", got, s.Exported, want)
	}
	if s.FinishReasons["length"] != 1 || s.FinishReasons["stop"] != 5 {
		t.Errorf("finish reasons %v", s.FinishReasons)
	}
}

// TestSpecForgeReadBack reads the export the way SpecForge's loader does:
// a JSON object per line with a string id and a conversations list; each
// turn's role and content (parse.py's _normalize_message), the system turn
// first when one was sent, turns alternating user/assistant after it, and
// the answer's reasoning only in reasoning_content, never as think tags.
func TestSpecForgeReadBack(t *testing.T) {
	out := filepath.Join(t.TempDir(), "train.jsonl")
	run(t, options(t, FormatSpecForge, out, fixtureDir(t, sink.FormatParquet)))
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	want := map[string]sink.Record{}
	for _, r := range fixtureRecords() {
		want[r.ID+"/"+strconv.Itoa(r.Sample)] = *r
	}
	seen := map[string]int{}
	for sc.Scan() {
		var row map[string]any
		if err := json.Unmarshal(sc.Bytes(), &row); err != nil {
			t.Fatalf("line is not a JSON object: %v", err)
		}
		id, ok := row["id"].(string)
		if !ok || id == "" {
			t.Fatalf("id %v is not a non-empty string", row["id"])
		}
		conv, ok := row["conversations"].([]any)
		if !ok || len(conv) < 2 {
			t.Fatalf("id %s: conversations %v", id, row["conversations"])
		}
		var roles []string
		for i, x := range conv {
			turn := x.(map[string]any)
			role, _ := turn["role"].(string)
			content, ok := turn["content"].(string)
			if !ok {
				t.Fatalf("id %s turn %d: no string content: %v", id, i, turn)
			}
			if strings.Contains(content, "<think>") || strings.Contains(content, "</think>") {
				t.Errorf("id %s turn %d: think tags in content %q", id, i, content)
			}
			if r, has := turn["reasoning_content"]; has && (role != "assistant" || i != len(conv)-1) {
				t.Errorf("id %s turn %d (%s): reasoning_content %v outside the answer", id, i, role, r)
			}
			roles = append(roles, role)
		}
		if !slices.Equal(roles, []string{"system", "user", "assistant"}) {
			t.Errorf("id %s: roles %v, want the system turn sent, the user turn, the answer", id, roles)
		}
		if conv[0].(map[string]any)["content"] != "Be brief." {
			t.Errorf("id %s: system turn %v", id, conv[0])
		}
		// Which sample: the one whose answer this is.
		answer := conv[len(conv)-1].(map[string]any)
		found := false
		for s := range 2 {
			r, ok := want[id+"/"+strconv.Itoa(s)]
			if ok && r.Content == answer["content"] {
				found = true
				seen[id+"/"+strconv.Itoa(s)]++
				rc, _ := answer["reasoning_content"].(string)
				if rc != r.Reasoning {
					t.Errorf("id %s: reasoning_content %q, want %q", id, rc, r.Reasoning)
				}
			}
		}
		if !found {
			t.Errorf("id %s: answer %q is no record's", id, answer["content"])
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 4 {
		t.Errorf("read back %d distinct answers, want 4: %v", len(seen), seen)
	}
}

// TestParquetReadBack: --out x.parquet holds the JSONL export's rows, with
// the conversations as a standard list (read back by column path).
func TestParquetReadBack(t *testing.T) {
	dir := fixtureDir(t, sink.FormatJSONL)
	tmp := t.TempDir()
	run(t, options(t, FormatSpecForge, filepath.Join(tmp, "t.jsonl"), dir))
	run(t, options(t, FormatSpecForge, filepath.Join(tmp, "t.parquet"), dir))
	var want []specforgeRow
	data, _ := os.ReadFile(filepath.Join(tmp, "t.jsonl"))
	for _, line := range bytes.Split(bytes.TrimSpace(data), []byte("\n")) {
		var r specforgeRow
		if err := json.Unmarshal(line, &r); err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	got := readParquet[specforgeRow](t, filepath.Join(tmp, "t.parquet"))
	if len(got) != len(want) {
		t.Fatalf("%d rows, want %d", len(got), len(want))
	}
	for i := range got {
		g, _ := json.Marshal(got[i])
		w, _ := json.Marshal(want[i])
		if !bytes.Equal(g, w) {
			t.Errorf("row %d:\n got %s\nwant %s", i, g, w)
		}
	}
	f, err := os.Open(filepath.Join(tmp, "t.parquet"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := pf.Schema().Lookup("conversations", "list", "element", "reasoning_content"); !ok {
		t.Errorf("no standard LIST column conversations.list.element.reasoning_content in %s", pf.Schema())
	}
}

func readParquet[T any](t *testing.T, path string) []T {
	t.Helper()
	rows, err := parquet.ReadFile[T](path)
	if err != nil {
		t.Fatal(err)
	}
	return rows
}

// TestHFLayout: --hf makes a directory with data/train-0000i-of-0000N.parquet
// holding every row once, in order, and a card naming the model, the
// sampling, the counts, the filters and the version.
func TestHFLayout(t *testing.T) {
	dir := fixtureDir(t, sink.FormatJSONL)
	out := filepath.Join(t.TempDir(), "ds")
	o := options(t, FormatMessages, out, dir)
	o.HF, o.RowsPerFile = true, 3
	s := run(t, o)
	wantFiles := []string{"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet", "README.md"}
	if !slices.Equal(s.Files, wantFiles) {
		t.Fatalf("files %v, want %v", s.Files, wantFiles)
	}
	var ids []string
	for _, f := range wantFiles[:2] {
		for _, r := range readParquet[messagesRow](t, filepath.Join(out, f)) {
			ids = append(ids, r.ID)
		}
	}
	if !slices.Equal(ids, []string{"2", "3", "10", "10"}) {
		t.Errorf("ids %v, want 2 3 10 10", ids)
	}
	card, err := os.ReadFile(filepath.Join(out, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "card.md", card)
	entries, _ := os.ReadDir(filepath.Dir(out))
	if len(entries) != 1 {
		t.Errorf("beside the dataset: %v (a temporary left?)", entries)
	}
	if _, err := Run(context.Background(), o); err == nil || !strings.Contains(err.Error(), "exists") {
		t.Errorf("export over an existing directory: %v", err)
	}
}

// TestNothingUnderOutOnFailure: an export stopped midway (its context
// cancelled, as by Ctrl-C) leaves the old file under Out and no temporary.
func TestNothingUnderOutOnFailure(t *testing.T) {
	dir := fixtureDir(t, sink.FormatJSONL)
	tmp := t.TempDir()
	out := filepath.Join(tmp, "train.jsonl")
	if err := os.WriteFile(out, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Run(ctx, options(t, FormatSpecForge, out, dir)); err == nil {
		t.Fatal("a cancelled export succeeded")
	}
	if got, _ := os.ReadFile(out); string(got) != "old\n" {
		t.Errorf("%s holds %q after a failed export", out, got)
	}
	entries, _ := os.ReadDir(tmp)
	if len(entries) != 1 {
		t.Errorf("left behind: %v", entries)
	}
}

// TestCheck: the flag combinations that are refused before anything is read.
func TestCheck(t *testing.T) {
	for _, o := range []Options{
		{Format: "alpaca", Out: "x"},
		{Format: FormatOpenAIBatch, Reasoning: ReasoningInline, Out: "x"},
		{Format: FormatMessages, Reasoning: "hide", Out: "x"},
		{Format: FormatMessages, IncludeErrors: true, Out: "x"},
		{Format: FormatOpenAIBatch, Out: "x.parquet"},
		{Format: FormatOpenAIBatch, Out: "x", HF: true},
		{Format: FormatMessages, Out: "-", HF: true},
		{Format: FormatMessages},
	} {
		if err := o.Check(); err == nil {
			t.Errorf("%+v accepted", o)
		}
	}
}

// TestSpilledIndexSameBytes: with an index budget of a few entries, the
// entries are sorted in many runs on disk beside the output and merged;
// every format's output is byte for byte the golden one, and the runs'
// file is gone afterwards.
func TestSpilledIndexSameBytes(t *testing.T) {
	defer func(b int) { indexBudget = b }(indexBudget)
	indexBudget = 100
	for _, shards := range []string{sink.FormatJSONL, sink.FormatParquet} {
		dir := fixtureDir(t, shards)
		for _, c := range []struct{ name, format string }{{"specforge", FormatSpecForge}, {"openai_batch", FormatOpenAIBatch}} {
			outDir := t.TempDir()
			out := filepath.Join(outDir, "train.jsonl")
			o := options(t, c.format, out, dir)
			o.IncludeErrors = c.format == FormatOpenAIBatch
			run(t, o)
			got, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			golden(t, c.name+".jsonl", got)
			if ents, _ := os.ReadDir(outDir); len(ents) != 1 {
				t.Errorf("%s: left beside the output: %v", shards, ents)
			}
		}
	}
}

// TestPercentileOfHistogram: the nearest-rank percentile of a histogram is
// that of the sorted values it counts.
func TestPercentileOfHistogram(t *testing.T) {
	values := []int32{5, 1, 9, 9, 3, 7, 7, 7, 2, 10, 4}
	hist := map[int32]int64{}
	for _, v := range values {
		hist[v]++
	}
	sorted := slices.Clone(values)
	slices.Sort(sorted)
	for _, p := range []int{1, 10, 50, 90, 99, 100} {
		i := (p*len(sorted) + 99) / 100
		if want := int(sorted[max(i-1, 0)]); percentile(hist, p) != want {
			t.Errorf("p%d = %d, want %d", p, percentile(hist, p), want)
		}
	}
	if percentile(map[int32]int64{}, 50) != 0 {
		t.Error("the percentile of nothing is not 0")
	}
}

// TestParquetRowGroupsBounded: a Parquet export is written in row groups
// of at most parquetRowGroup rows (the writer holds one in memory), and
// reads back whole.
func TestParquetRowGroupsBounded(t *testing.T) {
	defer func(n int64) { parquetRowGroup = n }(parquetRowGroup)
	parquetRowGroup = 2
	out := filepath.Join(t.TempDir(), "train.parquet")
	o := options(t, FormatSpecForge, out, fixtureDir(t, sink.FormatJSONL))
	o.KeepTruncated, o.KeepThinkTags = true, true
	sum := run(t, o)
	f, err := os.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if pf.NumRows() != sum.Exported || len(pf.RowGroups()) < int(sum.Exported/2) {
		t.Errorf("%d rows in %d row groups, want the %d exported in groups of at most 2", pf.NumRows(), len(pf.RowGroups()), sum.Exported)
	}
}

// TestNothingKeptIsRefused: an export whose filters take every record it
// read writes nothing and fails, naming each filter that took them and the
// flag that keeps them; with the flag the same records are exported.
func TestNothingKeptIsRefused(t *testing.T) {
	at := time.UnixMilli(1_700_000_000_000).UTC()
	var recs []*sink.Record
	for i := range 3 {
		recs = append(recs, &sink.Record{ID: fmt.Sprint(i), Messages: []chat.Message{{Role: "user", Content: "q"}},
			Content: "cut", FinishReason: "length", Model: "qwen3-8b", Attempts: 1, CreatedAt: at})
	}
	dir := writeDir(t, sink.FormatJSONL, 10, recs...)
	out := filepath.Join(t.TempDir(), "train.jsonl")
	_, err := Run(context.Background(), options(t, FormatMessages, out, dir))
	var nk *NothingKeptError
	if !errors.As(err, &nk) || !strings.Contains(err.Error(), "truncated took 3") || !strings.Contains(err.Error(), "--keep-truncated keeps them") {
		t.Fatalf("export of only truncated records: %v, want a refusal naming the truncated filter and --keep-truncated", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("%s: %v, want nothing written", out, err)
	}
	o := options(t, FormatMessages, out, dir)
	o.KeepTruncated = true
	if s := run(t, o); s.Exported != 3 {
		t.Errorf("with --keep-truncated: %d exported, want 3", s.Exported)
	}
}
