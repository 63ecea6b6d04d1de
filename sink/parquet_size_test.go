package sink

import (
	"encoding/binary"
	"encoding/json"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// proseWords are the vocabulary of proseText: text that compresses about
// as a model's English answer does (zstd takes it to a third or so).
var proseWords = strings.Fields(`the of and to a in is that for it as with was on be by this are
	not or at from have an which but we they can all so if will one more has been their there
	when would what about each then let me think step first second check answer value equal
	because therefore suppose assume case number function sum total given result above below
	x y n k equation solve compute substitute factor prime root square interval bound`)

// proseText is n bytes of words picked by a seeded generator: the same
// text each run.
func proseText(seed uint64, n int) string {
	r := rand.New(rand.NewPCG(seed, 1))
	var b strings.Builder
	b.Grow(n + 16)
	for b.Len() < n {
		b.WriteString(proseWords[r.IntN(len(proseWords))])
		if r.IntN(12) == 0 {
			b.WriteString(".\n")
		} else {
			b.WriteByte(' ')
		}
	}
	return b.String()[:n]
}

// partSize is what a Parquet part of recs costs: the part's bytes, the
// footer's (the file metadata, read from the length before the closing
// magic), and the journal's JSON it was converted from.
type partSize struct{ part, footer, journal int64 }

func convertedSize(t *testing.T, name string, recs []*Record) partSize {
	t.Helper()
	dir := t.TempDir()
	if keep := os.Getenv("SYNTHGEN_PARQUET_SIZE_DIR"); keep != "" {
		// Kept for another reader (DuckDB, pyarrow) to read.
		dir = filepath.Join(keep, name, "data")
		if err := os.MkdirAll(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		_ = os.Remove(filepath.Join(dir, "part-000001.parquet"))
	}
	journal := filepath.Join(dir, "part-000001.parquet"+SuffixJournal)
	var lines []byte
	for _, r := range recs {
		b, err := json.Marshal(r)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(append(lines, b...), '\n')
	}
	if err := os.WriteFile(journal, lines, 0o644); err != nil {
		t.Fatal(err)
	}
	final := filepath.Join(dir, "part-000001.parquet")
	if _, err := convertJournal(journal, final); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(final)
	if err != nil {
		t.Fatal(err)
	}
	footer := int64(binary.LittleEndian.Uint32(b[len(b)-8:]))
	return partSize{part: int64(len(b)), footer: footer, journal: int64(len(lines))}
}

// longAnswer is a record whose reasoning and content are long: the text
// columns whose statistics issue 30 found kept whole.
func longAnswer(i, reasoning, content int) *Record {
	r := testRecord(i)
	r.Reasoning = proseText(uint64(2*i), reasoning)
	r.Content = proseText(uint64(2*i+1), content)
	r.Messages[1].Content = proseText(uint64(i)+1<<32, 2000)
	return r
}

// TestParquetPartIsItsDataSize holds a Parquet part of long answers to
// the size of its data: the footer stays small (no column's statistics
// hold a whole answer) and the part is smaller than the JSON it came from.
// The figures of docs/decisions/2026-12-parquet-text-statistics.md come
// from its log (go test -run TestParquetPartIsItsDataSize -v ./sink/);
// with SYNTHGEN_PARQUET_SIZE_DIR set, the parts stay in DIR/NAME/data.
func TestParquetPartIsItsDataSize(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		recs func() []*Record
	}{
		// 200 answers of 8,192 tokens (about 32 KB each: 24 KB of
		// reasoning, 8 KB of content).
		{"200x32KB", func() []*Record {
			recs := make([]*Record, 200)
			for i := range recs {
				recs[i] = longAnswer(i, 24<<10, 8<<10)
			}
			return recs
		}},
		// One answer of 6.5 MB, as issue 30's.
		{"1x6.5MB", func() []*Record { return []*Record{longAnswer(1, 5<<20, 1536<<10)} }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			s := convertedSize(t, c.name, c.recs())
			t.Logf("%s: journal %d bytes, part %d bytes, footer %d bytes", c.name, s.journal, s.part, s.footer)
			if s.footer > 64<<10 {
				t.Errorf("footer is %d bytes: the statistics hold the text", s.footer)
			}
			if s.part >= s.journal {
				t.Errorf("part is %d bytes, its JSON %d: larger than its data", s.part, s.journal)
			}
		})
	}
}
