package sink

import (
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"
)

// bigTokenRecord is a record of n generated tokens with k alternatives
// each, values drawn as a real answer's look: ids over a 151K vocabulary,
// logprobs spread over float32's digits.
func bigTokenRecord(i, n, k int) *Record {
	rng := rand.New(rand.NewPCG(uint64(i), 7))
	r := testRecord(i)
	r.Turns = nil
	r.PromptTokenIDs = make([]int32, 512)
	for j := range r.PromptTokenIDs {
		r.PromptTokenIDs[j] = rng.Int32N(151_000)
	}
	r.TokenIDs = make([]int32, n)
	l := &Logprobs{TokenLogprobs: make([]float32, n), TopIDs: make([][]int32, n), TopLogprobs: make([][]float32, n)}
	ids, lps := make([]int32, n*k), make([]float32, n*k)
	for t := range n {
		r.TokenIDs[t] = rng.Int32N(151_000)
		lp := -rng.Float32() * rng.Float32() * 4
		l.TokenLogprobs[t] = lp
		for a := range k {
			ids[t*k+a] = rng.Int32N(151_000)
			lp -= rng.Float32() * 2
			lps[t*k+a] = lp
		}
		l.TopIDs[t], l.TopLogprobs[t] = ids[t*k:(t+1)*k], lps[t*k:(t+1)*k]
	}
	r.Logprobs = l
	r.CompletionTokens = n
	return r
}

// BenchmarkWriteTokenRecords is the writer's cost of records of 8,192
// tokens at 20 logprobs: its JSON line (B/op, ns/op a record) in JSONL and
// in a Parquet part's journal, whose conversion at the part's end is the
// rest of a Parquet part's cost (reported as convert-ms/record).
func BenchmarkWriteTokenRecords(b *testing.B) {
	const n, k = 8192, 20
	recs := make([]*Record, 8)
	for i := range recs {
		recs[i] = bigTokenRecord(i, n, k)
	}
	for _, format := range Formats() {
		b.Run("format="+format, func(b *testing.B) {
			dir := b.TempDir()
			opts := testOptions(dir, format)
			opts.PartSize = 1 << 30 // one part: converted at Close, measured apart
			s := mustOpen(b, opts)
			i := 0
			b.ReportAllocs()
			for b.Loop() {
				r := *recs[i%len(recs)]
				r.ID = "r" + string(rune('a'+i%26)) + string(rune('a'+i/26%26)) + string(rune('a'+i/676))
				if err := s.Write(&r); err != nil {
					b.Fatal(err)
				}
				i++
			}
			b.StopTimer()
			files, _ := filepath.Glob(filepath.Join(dir, "data", "part-*"))
			st, _ := os.Stat(files[0])
			b.ReportMetric(float64(st.Size())/float64(i*n), "journal-B/token")
			b.StartTimer()
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
		})
	}
}
