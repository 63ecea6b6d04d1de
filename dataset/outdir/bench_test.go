package outdir

import (
	"errors"
	"io"
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/dataset"
)

// BenchmarkSecondPassRows reads a first pass of 2000 records as the rows
// of a templated second pass: the sink's decoding, the record's JSON as a
// row, the rendering. Per op: one row.
//
//	go test -run XXX -bench SecondPassRows -benchmem ./dataset/outdir
func BenchmarkSecondPassRows(b *testing.B) {
	for _, format := range []string{"jsonl", "parquet"} {
		b.Run(format, func(b *testing.B) {
			dir := filepath.Join(b.TempDir(), "first")
			firstPass(b, dir, 2000, 1, format, 500)
			b.ResetTimer()
			rows := 0
			for rows < b.N {
				r, err := dataset.Open(withReader(dataset.Options{Selection: dataset.Selection{Path: dir}, Template: judge}))
				if err != nil {
					b.Fatal(err)
				}
				for rows < b.N {
					if _, err := r.Next(); errors.Is(err, io.EOF) {
						break
					} else if err != nil {
						b.Fatal(err)
					}
					rows++
				}
				r.Close()
			}
		})
	}
}
