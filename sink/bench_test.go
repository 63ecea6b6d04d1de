package sink

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"
)

// benchRecord is the size of a typical reasoning answer: ~3 KB of
// reasoning, ~1 KB of content.
func benchRecord(i int) *Record {
	r := testRecord(i)
	r.Sample = 0
	r.Reasoning = strings.Repeat("Let me check the second case again. ", 85)
	r.Content = strings.Repeat("The answer is 42. ", 56)
	return r
}

func BenchmarkWrite(b *testing.B) {
	for _, format := range []string{FormatJSONL, FormatParquet} {
		b.Run(format, func(b *testing.B) {
			opts := testOptions(b.TempDir(), format)
			opts.ShardSize = 1000
			opts.SyncInterval = time.Second
			s := mustOpen(b, opts)
			r := benchRecord(0)
			line, _ := json.Marshal(r)
			b.SetBytes(int64(len(line)))
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				r.ID = strconv.Itoa(i)
				if err := s.Write(r); err != nil {
					b.Fatal(err)
				}
				i++
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportMetric(float64(i)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// BenchmarkLineKey compares the key extractor resume uses with decoding the
// two fields through encoding/json (which scans the whole line).
func BenchmarkLineKey(b *testing.B) {
	line, _ := json.Marshal(benchRecord(123456))
	b.Run("fast", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			if _, err := lineKey(line); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.SetBytes(int64(len(line)))
		b.ReportAllocs()
		for b.Loop() {
			var v struct {
				ID     string `json:"id"`
				Sample int    `json:"sample"`
			}
			if err := json.Unmarshal(line, &v); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// BenchmarkOpen measures a resume over a directory of done records: the
// recovery pass reads ids only. SINK_BENCH_OPEN_RECORDS overrides the
// record count (e.g. 1000000); records are compact (~600 bytes) so that
// the fixture stays small on a shared disk.
func BenchmarkOpen(b *testing.B) {
	n := 200_000
	if v := os.Getenv("SINK_BENCH_OPEN_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("SINK_BENCH_OPEN_RECORDS: %v", err)
		}
	}
	for _, format := range []string{FormatJSONL, FormatParquet} {
		b.Run(fmt.Sprintf("%s/%d", format, n), func(b *testing.B) {
			opts := testOptions(b.TempDir(), format)
			opts.ShardSize = 1000
			opts.SyncInterval = time.Hour
			s := mustOpen(b, opts)
			r := testRecord(0)
			for i := range n {
				r.ID = strconv.Itoa(i)
				if err := s.Write(r); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				s := mustOpen(b, opts)
				if s.DoneCount() != n {
					b.Fatalf("DoneCount = %d, want %d", s.DoneCount(), n)
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}
