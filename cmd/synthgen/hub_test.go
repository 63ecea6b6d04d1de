package main

import (
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

// miniHub is the smallest fake of the Hub API that a run needs: one
// dataset whose main branch can move, files stored in git (no LFS).
type miniHub struct {
	mu      sync.Mutex
	main    string            // the commit main points at
	commits map[string][]byte // commit -> data/train-00000-of-00001.jsonl
}

const hubFile = "data/train-00000-of-00001.jsonl"

func hubRows(tag string, n int) []byte {
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"conversations":[{"from":"human","value":"%s question %d"}],"source":"hub"}`+"\n", tag, i)
	}
	return []byte(b.String())
}

func blobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func (h *miniHub) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	p := r.URL.Path
	switch {
	case p == "/api/datasets/acme/blend/revision/main":
		json.NewEncoder(w).Encode(map[string]any{"id": "acme/blend", "sha": h.main, "siblings": []any{}})
	case strings.HasPrefix(p, "/api/datasets/acme/blend/revision/"):
		sha := strings.TrimPrefix(p, "/api/datasets/acme/blend/revision/")
		if _, ok := h.commits[sha]; !ok {
			w.Header().Set("X-Error-Code", "RevisionNotFound")
			http.Error(w, `{"error":"Invalid rev id"}`, http.StatusNotFound)
			return
		}
		json.NewEncoder(w).Encode(map[string]any{"id": "acme/blend", "sha": sha, "siblings": []any{}})
	case strings.HasPrefix(p, "/api/datasets/acme/blend/tree/"):
		sha := strings.SplitN(strings.TrimPrefix(p, "/api/datasets/acme/blend/tree/"), "/", 2)[0]
		data := h.commits[sha]
		json.NewEncoder(w).Encode([]map[string]any{
			{"type": "directory", "oid": "d", "size": 0, "path": "data"},
			{"type": "file", "oid": blobID(data), "size": len(data), "path": hubFile},
		})
	case strings.HasPrefix(p, "/datasets/acme/blend/resolve/"):
		sha := strings.SplitN(strings.TrimPrefix(p, "/datasets/acme/blend/resolve/"), "/", 2)[0]
		w.Write(h.commits[sha])
	default:
		http.NotFound(w, r)
	}
}

// TestRunHubDatasetPinnedAcrossResumes: a job on hf://owner/name reads the
// commit its branch pointed at when the job began, on every resume, even
// after the branch moved and with the Hub out of reach: the ids of a resume
// must mean the rows they meant before.
func TestRunHubDatasetPinnedAcrossResumes(t *testing.T) {
	const commitA, commitB = "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb"
	hub := &miniHub{main: commitA, commits: map[string][]byte{commitA: hubRows("A", 10), commitB: hubRows("B", 10)}}
	hs := httptest.NewServer(hub)
	t.Setenv("HF_ENDPOINT", hs.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	t.Setenv("SYNTHGEN_CACHE_DIR", t.TempDir())
	_, base := cliMock(t, nil)
	cj := cliJob{baseURL: base, data: "hf://acme/blend", dir: filepath.Join(t.TempDir(), "out")}

	r := cliRun(t, cj.args("--dataset.limit", "5")...)
	r.ok(t, "first run")
	if !strings.Contains(r.stderr, "hf://acme/blend is hf://acme/blend@"+commitA) {
		t.Errorf("the run does not say which commit it reads:\n%s", r.stderr)
	}
	m, err := sink.ReadManifest(cj.dir)
	if err != nil {
		t.Fatal(err)
	}
	stored, err := job.ManifestJob(cj.dir, m.Job, m.Identity)
	if err != nil {
		t.Fatal(err)
	}
	if got := stored.Selection.Revision; got != "hf://acme/blend@"+commitA {
		t.Errorf("manifest selection.revision = %q, want the pinned commit", got)
	}

	hub.mu.Lock()
	hub.main = commitB
	hub.mu.Unlock()
	r = cliRun(t, cj.args("--dataset.limit", "8")...)
	r.ok(t, "resume after the branch moved")
	hs.Close() // a resume needs no network for the dataset
	r = cliRun(t, cj.args("--dataset.limit", "10")...)
	r.ok(t, "resume with the Hub unreachable")
	wantIDs(t, "records", cliRecords(t, cj.dir), idRange(0, 10)...)
	for _, rec := range readAllRecords(t, cj.dir) {
		if q := rec.Messages[len(rec.Messages)-1].Content; !strings.HasPrefix(q, "A question ") {
			t.Errorf("record %s was asked %q: not a row of the pinned commit", rec.ID, q)
		}
	}
	// inspect reads the job's rows through the Hub client too, from the
	// cached commit.
	out, err := runInspectCmd(t, cj.dir)
	if want := "10 keys in hf://acme/blend (limit 10): 10 done, 0 failed, 0 pending"; err != nil || !strings.Contains(out, want) {
		t.Errorf("inspect: %v; output lacks %q:\n%s", err, want, out)
	}
}

// readAllRecords reads every record of DIR/data's final JSONL shards.
func readAllRecords(t *testing.T, dir string) []sink.Record {
	t.Helper()
	var out []sink.Record
	files, _ := filepath.Glob(filepath.Join(dir, "data", "*.jsonl"))
	for _, f := range files {
		for _, line := range strings.Split(strings.TrimSpace(string(readFileT(t, f))), "\n") {
			var r sink.Record
			if err := json.Unmarshal([]byte(line), &r); err != nil {
				t.Fatalf("%s: %v", f, err)
			}
			out = append(out, r)
		}
	}
	return out
}

func readFileT(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}
