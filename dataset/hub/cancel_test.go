package hub

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
)

// TestHubDownloadEndsWithContext: a person who presses Ctrl-C during a long
// download gets their terminal back at once (the download resumes next
// time), instead of waiting for gigabytes they no longer want.
func TestHubDownloadEndsWithContext(t *testing.T) {
	data := []byte(strings.Repeat(`{"prompt":"hello there"}`+"\n", 4096))
	sha := fakeSHA("cancel")
	started := make(chan struct{}, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case strings.HasPrefix(r.URL.Path, "/api/datasets/acme/slow/revision/"):
			json.NewEncoder(w).Encode(map[string]any{"id": "acme/slow", "sha": sha})
		case strings.HasPrefix(r.URL.Path, "/api/datasets/acme/slow/tree/"):
			json.NewEncoder(w).Encode([]map[string]any{
				{"type": "file", "oid": gitBlobID(data), "size": len(data), "path": "train.jsonl"},
			})
		case strings.HasPrefix(r.URL.Path, "/datasets/acme/slow/resolve/"):
			w.Write(data[:len(data)/2])
			w.(http.Flusher).Flush()
			select {
			case started <- struct{}{}:
			default:
			}
			<-r.Context().Done() // the rest never comes
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	t.Setenv("HF_ENDPOINT", srv.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("SYNTHGEN_CACHE_DIR", t.TempDir())

	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() {
		_, err := count(dataset.Options{Selection: dataset.Selection{Path: "hf://acme/slow", Format: dataset.FormatPrompt, PromptField: "prompt"}, OnBadRow: dataset.OnBadRowSkip, Context: ctx})
		done <- err
	}()
	select {
	case <-started:
	case <-time.After(10 * time.Second):
		t.Fatal("the download never started")
	}
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("Count after cancel: %v, want context.Canceled", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Count still downloading 30 s after its context was cancelled")
	}
}
