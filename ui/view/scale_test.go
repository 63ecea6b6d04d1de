package view

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// TestViewScale measures the index on a large directory; it runs only with
// SYNTHGEN_VIEW_SCALE=N (records), in SYNTHGEN_VIEW_SCALE_DIR when set
// (kept, and reused by the next run) or a temporary directory, and
// SYNTHGEN_VIEW_SCALE_FORMAT (jsonl, the default, or parquet). It logs how
// long the build, the first page, a sorted page, a filter and a capped
// search take, and the heap beside the index. The whole process's peak
// RSS is measured on `synthgen view` itself (ARCHITECTURE.md, "The view").
func TestViewScale(t *testing.T) {
	n, _ := strconv.Atoi(os.Getenv("SYNTHGEN_VIEW_SCALE"))
	if n <= 0 {
		t.Skip("set SYNTHGEN_VIEW_SCALE=1000000 to measure the index on a million records")
	}
	format := os.Getenv("SYNTHGEN_VIEW_SCALE_FORMAT")
	if format == "" {
		format = sink.FormatJSONL
	}
	dir := os.Getenv("SYNTHGEN_VIEW_SCALE_DIR")
	if dir == "" {
		dir = t.TempDir()
	}
	if _, err := os.Stat(filepath.Join(dir, sink.ManifestName)); err != nil {
		t0 := time.Now()
		writeScaleDir(t, dir, format, n)
		t.Logf("wrote %d records (%s) in %s", n, format, time.Since(t0).Round(time.Millisecond))
	}
	ix := NewIndex([]string{dir})
	defer ix.Close()
	t0 := time.Now()
	if err := ix.Wait(context.Background()); err != nil {
		t.Fatal(err)
	}
	p := ix.Progress()
	t.Logf("index: %d records, %d MiB read, in %s", p.Records, p.Bytes>>20, time.Since(t0).Round(time.Millisecond))
	var ms runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms)
	t.Logf("index blocks: %d (%d MiB off the heap); Go heap in use after GC: %d MiB", len(ix.blocks), len(ix.blocks)*blockSize>>20, ms.HeapInuse>>20)

	timed := func(what string, q Query, page int) {
		t0 := time.Now()
		pos := ix.Select(q)
		sel := time.Since(t0)
		from := min(page*defaultPerPage, len(pos))
		rows, err := ix.Rows(pos[from:min(from+defaultPerPage, len(pos))])
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s: %d selected in %s, a page of %d read in %s", what, len(pos), sel.Round(time.Microsecond), len(rows), (time.Since(t0) - sel).Round(time.Microsecond))
	}
	timed("first page", AnyQuery, 0)
	timed("last page", AnyQuery, (n-1)/defaultPerPage)
	q := AnyQuery
	q.Sort, q.Desc = "latency", true
	timed("sorted by latency", q, 0)
	timed("sorted by latency, again (cached)", q, 3)
	q = AnyQuery
	q.Truncated = true
	timed("truncated", q, 0)
	t0 = time.Now()
	d := ix.Dist(2048)
	t.Logf("distributions of %d records in %s", d.Records, time.Since(t0).Round(time.Millisecond))
	q = AnyQuery
	q.Text = "needle-in-the-answer"
	t0 = time.Now()
	found := 0
	read, err := ix.Search(context.Background(), q, 200, func(Match) error { found++; return nil }, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("search: %d found (cap 200) after reading %d records in %s", found, read, time.Since(t0).Round(time.Millisecond))
}

// writeScaleDir writes n records of about 1.3 KiB through the sink, in
// parts of 1000 (the default shard_size); one in 1000 holds the words a
// search looks for.
func writeScaleDir(t *testing.T, dir, format string, n int) {
	s, err := sink.Open(sink.Options{Dir: dir, Format: format, PartSize: 1000, Job: fixtureJob(t), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	words := strings.Fields("the model thinks about the question and then answers it with some care, giving reasons and an example")
	text := func(i, k int) string {
		var b strings.Builder
		for j := 0; b.Len() < k; j++ {
			b.WriteString(words[(i+j*7)%len(words)])
			b.WriteByte(' ')
		}
		return b.String()
	}
	for i := range n {
		r := sink.Record{
			ID: strconv.Itoa(i), Source: "math",
			Messages:  []chat.Message{{Role: "user", Content: fmt.Sprintf("question %d: %s", i, text(i, 120))}},
			Reasoning: text(i, 300+i%400), Content: text(i+1, 200+i%300),
			FinishReason: "stop", Model: "mock-model", PromptTokens: 40 + i%30, CompletionTokens: 100 + i%1900,
			LatencyMS: float64(500 + i%9000), TTFTMS: float64(20 + i%300), Attempts: 1,
			CreatedAt: time.Date(2025, 6, 1, 0, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond),
		}
		if i%20 == 0 {
			r.FinishReason, r.CompletionTokens = "length", 2048
		}
		if i%1000 == 999 {
			r.Content += " needle-in-the-answer"
		}
		if err := s.Write(&r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}
