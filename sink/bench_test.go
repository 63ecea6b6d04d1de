package sink

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
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
	for _, format := range Formats() {
		b.Run(format, func(b *testing.B) {
			opts := testOptions(b.TempDir(), format)
			opts.PartSize = 1000
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
// recovery pass reads ids only. The directory is built the way a long job
// builds it, over several runs with different part sizes (each clean exit
// also leaves a short last part); "mixed" alternates the output format
// between runs, so JSONL and Parquet parts lie side by side.
// SINK_BENCH_OPEN_RECORDS overrides the record count (e.g. 1000000);
// records are compact (~600 bytes) so that the fixture stays small on a
// shared disk.
func BenchmarkOpen(b *testing.B) {
	n := 200_000
	if v := os.Getenv("SINK_BENCH_OPEN_RECORDS"); v != "" {
		var err error
		if n, err = strconv.Atoi(v); err != nil {
			b.Fatalf("SINK_BENCH_OPEN_RECORDS: %v", err)
		}
	}
	partSizes := []int{1000, 250, 4000, 100}
	for _, formats := range [][]string{{FormatJSONL}, {FormatParquet}, {FormatJSONL, FormatParquet}} {
		name := formats[0]
		if len(formats) > 1 {
			name = "mixed"
		}
		b.Run(fmt.Sprintf("%s/%d", name, n), func(b *testing.B) {
			dir := b.TempDir()
			r := testRecord(0)
			for run, size := range partSizes {
				opts := testOptions(dir, formats[run%len(formats)])
				opts.PartSize = size
				opts.SyncInterval = time.Hour
				s := mustOpen(b, opts)
				for i := run * n / len(partSizes); i < (run+1)*n/len(partSizes); i++ {
					r.ID = strconv.Itoa(i)
					if err := s.Write(r); err != nil {
						b.Fatal(err)
					}
				}
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
			}
			opts := testOptions(dir, formats[0])
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

// BenchmarkManifestBookkeeping writes a job of 2,000 one-record parts and
// reports the bytes the manifest's bookkeeping wrote per part: the
// rewrites of manifest.json (each counted whole, at its rename) and the
// appends to the part log. "append" is the sink as it is; "rewrite" also
// rewrites manifest.json after every part, as the sink did before the log
// (whose bytes it then leaves out: the old sink had none), so one run shows
// both. Run with -benchtime=1x: an iteration is a whole job.
func BenchmarkManifestBookkeeping(b *testing.B) {
	const parts = 2000
	for _, mode := range []string{"append", "rewrite"} {
		b.Run(mode, func(b *testing.B) {
			var manifestBytes, logBytes, logSize int64
			for b.Loop() {
				dir := b.TempDir()
				opts := testOptions(dir, FormatJSONL)
				opts.PartSize = 1
				opts.SyncInterval = time.Hour
				var s *Sink
				rewriting := false
				stepHook = func(op, path string) {
					switch {
					case op == "rename" && manifestTmp.MatchString(filepath.Base(path)):
						if st, err := os.Stat(path); err == nil {
							manifestBytes += st.Size()
						}
					case op == "fsync" && IsPartLog(filepath.Base(path)):
						st, err := os.Stat(path)
						if err != nil {
							b.Fatal(err)
						}
						if mode == "append" {
							logBytes += st.Size() - logSize
						}
						logSize = st.Size()
						if mode == "rewrite" && !rewriting {
							rewriting = true
							m := *s.man
							m.PartLog = ""
							if err := writeManifest(dir, &m); err != nil {
								b.Fatal(err)
							}
							rewriting = false
						}
					}
				}
				s = mustOpen(b, opts)
				logSize = 0
				writeRange(b, s, 0, parts)
				if err := s.Close(); err != nil {
					b.Fatal(err)
				}
				stepHook = nil
			}
			n := float64(b.N * parts)
			b.ReportMetric(float64(manifestBytes+logBytes)/n, "bookkeeping-B/shard")
			b.ReportMetric(float64(manifestBytes)/n, "manifest.json-B/shard")
			b.ReportMetric(float64(logBytes)/n, "log-B/shard")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/n, "ns/shard")
		})
	}
}
