package pool

import (
	"context"
	"net/http/httptest"
	"os"
	"reflect"
	"testing"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/wire"
)

// skippingSource is a sliceSource that asks its SetSkip function about each
// row before "decoding" it, as dataset.Reader does, and counts the rows it
// handed out decoded.
type skippingSource struct {
	*sliceSource
	skip    dataset.SkipFunc
	decoded int
}

func (s *skippingSource) SetSkip(fn dataset.SkipFunc) { s.skip = fn }

func (s *skippingSource) Next() (dataset.Prompt, error) {
	for {
		p, err := s.sliceSource.Next()
		if err != nil {
			return p, err
		}
		if s.skip != nil && s.skip(p.ID, p.Index, false) {
			continue
		}
		s.decoded++
		return p, nil
	}
}

// A resume that passes rows over before decoding them asks the same keys,
// counts the same done, failed and repeated keys, and decodes only the rows
// with a key to ask or a repeated id: with two samples, one of which was
// done; with repeated ids; with own ids that spell row indices.
func TestProduceSkipsAsWithoutSkip(t *testing.T) {
	srv := &countingServer{}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	client := wire.New(wire.Options{BaseURL: ts.URL + "/v1", MaxConns: 4})
	ids := []string{"0", "1", "2", "1", "x", "x", "6", "7", "9", "9", "01", "11", "12", "13"}

	// A first run over the first 8 rows, sample 0 only.
	base := t.TempDir()
	opts := testOptions(4)
	opts.UniqueIDs = true
	out := openSink(t, base)
	eng, _ := New(client, runstats.NewStats(nil), opts)
	if _, err := eng.Run(context.Background(), newSliceSource(ids[:8]...), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}

	type result struct {
		Sum      runstats.Summary
		Requests int64
		IDs      map[string]int
	}
	resume := func(samples int, skipping bool) (result, *skippingSource) {
		dir := t.TempDir()
		copyTree(t, base, dir)
		opts := testOptions(4)
		opts.UniqueIDs, opts.Sampling.Samples = true, samples
		out := openSink(t, dir)
		eng, _ := New(client, runstats.NewStats(nil), opts)
		before := srv.requests.Load()
		var src Source = newSliceSource(ids...)
		sk := &skippingSource{sliceSource: newSliceSource(ids...)}
		if skipping {
			src = sk
		}
		sum, err := eng.Run(context.Background(), src, out)
		if err != nil {
			t.Fatal(err)
		}
		if err := out.Close(); err != nil {
			t.Fatal(err)
		}
		return result{Sum: sum, Requests: srv.requests.Load() - before, IDs: readIDs(t, dir)}, sk
	}
	for _, samples := range []int{1, 2} {
		want, _ := resume(samples, false)
		got, sk := resume(samples, true)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("samples %d: with skip %+v, without %+v", samples, got, want)
		}
		// One sample: only the rows asked are decoded (8, 10-13), and the
		// rows repeating an id (3, 5, 9), so that the reader can report
		// each as a bad row with its line; two: sample 1 is new, so all.
		if wantDecoded := map[int]int{1: 5 + 3, 2: len(ids)}[samples]; sk.decoded != wantDecoded {
			t.Errorf("samples %d: %d rows decoded, want %d", samples, sk.decoded, wantDecoded)
		}
	}
}

// copyTree copies a directory tree of regular files.
func copyTree(t *testing.T, src, dst string) {
	t.Helper()
	if err := os.CopyFS(dst, os.DirFS(src)); err != nil {
		t.Fatal(err)
	}
}
