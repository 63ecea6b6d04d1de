package sink

import (
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/parquet-go/parquet-go"
)

// tokenRecord is testRecord with tokens: ids, a mismatch note, logprobs
// by id (every third) or by text (others), and the same per turn.
func tokenRecord(i int) *Record {
	r := testRecord(i)
	ids := func(base, n int) []int32 {
		out := make([]int32, n)
		for k := range out {
			out[k] = int32(base + k*7919) // ids up to ~150K, as real vocabularies have
		}
		return out
	}
	lp := func(n, k int, byText bool) *Logprobs {
		l := &Logprobs{}
		for t := range n {
			l.TokenLogprobs = append(l.TokenLogprobs, -float32(t)/8)
			var top []float32
			var topIDs []int32
			var topText []string
			for a := range k {
				top = append(top, -float32(a)-0.125)
				topIDs = append(topIDs, int32(t*100+a))
				topText = append(topText, []string{" the", "\n", "é\"", ""}[a%4])
			}
			l.TopLogprobs = append(l.TopLogprobs, top)
			if byText {
				l.TopTokens = append(l.TopTokens, topText)
			} else {
				l.TopIDs = append(l.TopIDs, topIDs)
			}
		}
		return l
	}
	r.PromptTokenIDs = ids(151643, 12+i)
	r.TokenIDs = ids(i, 5+i)
	r.Logprobs = lp(len(r.TokenIDs), 1+i%5, i%3 != 0)
	if i%4 == 1 {
		r.TokenIDsMismatch = "6 token_ids, usage.completion_tokens 7"
	}
	for k := range r.Turns {
		r.Turns[k].PromptTokenIDs = ids(k, 4+k)
		r.Turns[k].TokenIDs = ids(k+1, 3+k)
		r.Turns[k].Logprobs = lp(3+k, 2, k == 1)
	}
	if i%5 == 4 {
		r.PromptTokenIDs, r.TokenIDs, r.Logprobs = nil, nil, nil // a record without tokens between others
	}
	return r
}

// testTokensReadBack: a record's token ids and logprobs, top-level and per
// turn, come back exactly from JSONL and Parquet, through the sink's reader
// and through parquet-go reading the file alone; a record without them
// reads with none (nil, as its JSON line omits them).
func testTokensReadBack(t *testing.T, format string) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, format))
	var want []Record
	for i := range 13 {
		r := tokenRecord(i)
		want = append(want, *r)
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	var got []Record
	files, _ := filepath.Glob(filepath.Join(dir, "data", "part-*"))
	slices.Sort(files)
	for _, f := range files {
		if err := ForEachRecord(f, func(rec *Record, _ Span) error {
			rec.CreatedAt = rec.CreatedAt.UTC()
			if len(rec.Turns) == 0 {
				rec.Turns = nil
			}
			got = append(got, *rec)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
	if len(got) != len(want) {
		t.Fatalf("%d records read, %d written", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("record %d read back differs:\n got %+v\nwant %+v", i, got[i], want[i])
		}
	}
	if got[4].TokenIDs != nil || got[4].Logprobs != nil {
		t.Errorf("a record without tokens read with %v %+v", got[4].TokenIDs, got[4].Logprobs)
	}
	other := readParts(t, dir)
	for i := range other {
		if !slices.Equal(other[i].TokenIDs, want[i].TokenIDs) || !slices.Equal(other[i].PromptTokenIDs, want[i].PromptTokenIDs) {
			t.Errorf("record %d: another reader reads ids %v %v, want %v %v", i, other[i].PromptTokenIDs, other[i].TokenIDs, want[i].PromptTokenIDs, want[i].TokenIDs)
		}
	}
}

// TestTokensParquetSchema: the ids are Parquet lists of INT32 and the
// logprobs lists of FLOAT (nested for the alternatives), in the standard
// LIST layout other readers take; a record without logprobs has a null
// logprobs group.
func TestTokensParquetSchema(t *testing.T) {
	schema := parquet.SchemaOf(Record{}).String()
	for _, want := range []string{
		"required group prompt_token_ids (LIST) {\n\t\trepeated group list {\n\t\t\trequired int32 element (INT(32,true));",
		"required group token_ids (LIST) {\n\t\trepeated group list {\n\t\t\trequired int32 element (INT(32,true));",
		"optional group logprobs {",
		"required group token_logprobs (LIST) {\n\t\t\trepeated group list {\n\t\t\t\trequired float element;",
		"required group top_ids (LIST) {\n\t\t\trepeated group list {\n\t\t\t\trequired group element (LIST) {\n\t\t\t\t\trepeated group list {\n\t\t\t\t\t\trequired int32 element (INT(32,true));",
	} {
		if !strings.Contains(schema, want) {
			t.Errorf("schema lacks\n%s\nin\n%s", want, schema)
		}
	}
}

// messageBeforeTools is a message as parts written before its tool
// columns hold it.
type messageBeforeTools struct {
	Role    string `parquet:"role"`
	Content string `parquet:"content"`
}

// recordBeforeTokens is the record as parts written before the token
// columns hold it.
type recordBeforeTokens struct {
	ID               string               `parquet:"id"`
	Sample           int                  `parquet:"sample"`
	Source           string               `parquet:"source"`
	Messages         []messageBeforeTools `parquet:"messages,list"`
	Reasoning        string               `parquet:"reasoning"`
	Content          string               `parquet:"content"`
	FinishReason     string               `parquet:"finish_reason"`
	Model            string               `parquet:"model"`
	PromptTokens     int                  `parquet:"prompt_tokens"`
	CompletionTokens int                  `parquet:"completion_tokens"`
	LatencyMS        float64              `parquet:"latency_ms"`
	TTFTMS           float64              `parquet:"ttft_ms"`
	Attempts         int                  `parquet:"attempts"`
	CreatedAt        time.Time            `parquet:"created_at,timestamp(millisecond)"`
}

// TestPartBeforeTokensReads: a Parquet part written before the token
// columns existed reads, its records without tokens.
func TestPartBeforeTokensReads(t *testing.T) {
	path := filepath.Join(t.TempDir(), "part-000000.parquet")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	w := parquet.NewGenericWriter[recordBeforeTokens](f)
	if _, err := w.Write([]recordBeforeTokens{{ID: "1", Content: "old", CreatedAt: time.UnixMilli(1), Messages: []messageBeforeTools{{Role: "user", Content: "q"}}}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	f.Close()
	n := 0
	if err := ForEachRecord(path, func(rec *Record, _ Span) error {
		n++
		if rec.Content != "old" || len(rec.Messages) != 1 || rec.Messages[0].Content != "q" || rec.Messages[0].ToolCalls != nil || rec.ToolCalls != nil || rec.TokenIDs != nil || rec.PromptTokenIDs != nil || rec.Logprobs != nil || rec.TokenIDsMismatch != "" ||
			rec.CachedTokens != 0 || rec.Cost != 0 {
			t.Errorf("old part's record read as %+v", rec)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if n != 1 {
		t.Errorf("%d records, want 1", n)
	}
}

// TestTokensPartInRowGroups: a Parquet part whose journal holds more than
// rowGroupBytes of JSON is written in several row groups, so that the
// conversion never holds the whole part, and reads back whole and in
// order.
func TestTokensPartInRowGroups(t *testing.T) {
	defer func(v int) { rowGroupBytes = v }(rowGroupBytes)
	rowGroupBytes = 1 << 20
	dir := t.TempDir()
	opts := testOptions(dir, FormatParquet)
	opts.PartSize = 30
	s := mustOpen(t, opts)
	var want []*Record
	for i := range 30 {
		r := bigTokenRecord(i, 2048, 5) // about 200 KB of JSON each
		r.ID = fmt.Sprint(i)
		want = append(want, r)
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "data", "part-000000.parquet")
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	st, _ := f.Stat()
	pf, err := parquet.OpenFile(f, st.Size())
	if err != nil {
		t.Fatal(err)
	}
	if groups := len(pf.RowGroups()); groups < 4 {
		t.Errorf("%d row groups for 6 MB of rows at 1 MB a group", groups)
	}
	i := 0
	if err := ForEachRecord(path, func(rec *Record, _ Span) error {
		if rec.ID != want[i].ID || !slices.Equal(rec.TokenIDs, want[i].TokenIDs) || !reflect.DeepEqual(rec.Logprobs, want[i].Logprobs) {
			t.Errorf("record %d read back differs", i)
		}
		i++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if i != 30 {
		t.Errorf("%d records read, 30 written", i)
	}
}

// TestTokensBytesOnDisk measures what a token costs on disk (the figures of
// docs/training-data.md): records of 8,192 tokens, ids alone and with 20 logprobs, the
// values spread as a real answer's (bigTokenRecord), in JSONL and in
// Parquet (zstd), over the same records without tokens. It fails when a
// figure passes the bound that page promises.
func TestTokensBytesOnDisk(t *testing.T) {
	const n, records = 8192, 4
	bounds := map[string]float64{ // bytes a token, at most
		"jsonl ids": 7, "jsonl logprobs": 380, "parquet ids": 3, "parquet logprobs": 135,
	}
	size := func(format string, strip func(*Record)) int64 {
		dir := t.TempDir()
		opts := testOptions(dir, format)
		opts.PartSize = records
		s := mustOpen(t, opts)
		for i := range records {
			r := bigTokenRecord(i, n, 20)
			r.ID = fmt.Sprint(i)
			strip(r)
			if err := s.Write(r); err != nil {
				t.Fatal(err)
			}
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		files, _ := filepath.Glob(filepath.Join(dir, "data", "part-*"))
		var total int64
		for _, f := range files {
			st, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			total += st.Size()
		}
		return total
	}
	none := func(r *Record) { r.PromptTokenIDs, r.TokenIDs, r.Logprobs = nil, nil, nil }
	idsOnly := func(r *Record) { r.PromptTokenIDs, r.Logprobs = nil, nil }
	all := func(r *Record) { r.PromptTokenIDs = nil }
	for _, format := range []string{FormatJSONL, FormatParquet} {
		base := size(format, none)
		for name, strip := range map[string]func(*Record){"ids": idsOnly, "logprobs": all} {
			per := float64(size(format, strip)-base) / (records * n)
			t.Logf("%s, %s: %.1f bytes a token", format, name, per)
			if b := bounds[format+" "+name]; per > b {
				t.Errorf("%s, %s: %.1f bytes a token, want at most %.0f", format, name, per, b)
			}
		}
	}
}
