package generator

import (
	"context"
	"errors"
	"io/fs"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/mockserver"
)

// TestOpenRefusesAnUnpricedModel: with a price per model and no
// endpoint.model, the model the server lists is known only at Open; a
// price without it stops the run there, before the output directory
// exists, naming the key and the model.
func TestOpenRefusesAnUnpricedModel(t *testing.T) {
	t.Parallel()
	ts := httptest.NewServer(mockserver.New(mockserver.Options{Seed: 1}))
	t.Cleanup(ts.Close)
	dir := t.TempDir()
	data := filepath.Join(dir, "rows.jsonl")
	if err := os.WriteFile(data, []byte(`{"messages":[{"role":"user","content":"q"}]}`+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, err := Open(ctx, Setup{
		Job: job.Job{
			Selection: dataset.Selection{Path: data, Format: "messages"},
			Sampling:  job.Sampling{MaxTokens: 8, Samples: 1}, // the first model listed
		},
		BaseURL: ts.URL + "/v1", Concurrency: 1, Dir: out, Format: "jsonl", PartSize: 10, Version: "test",
		Price: func(model string) (runstats.Price, bool) { return runstats.Price{}, model == "gpt-4o" },
	})
	if err == nil || !strings.Contains(err.Error(), "endpoint.price") || !strings.Contains(err.Error(), mockserver.DefaultModel) {
		t.Fatalf("Open: %v, want endpoint.price's refusal naming %s", err, mockserver.DefaultModel)
	}
	if _, err := os.Stat(out); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the output directory was touched: %v", err)
	}
}
