package hub

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/dataset"
)

// TestHubReadAndCache reads the default selection of a Hub dataset: the two
// train files under data/, giving the same prompts, ids and row locations as
// the same files read locally. A second open downloads nothing, and with the
// Hub gone the cache still serves both the branch and the pinned commit.
func TestHubReadAndCache(t *testing.T) {
	h := newFakeHub(t)
	train := []string{"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"}
	local := localCopy(t, h, commit1, train...)
	want := hubPrompts(t, at(filepath.Join(local, "data", "train-*.parquet")), local)
	if len(want) != 68 {
		t.Fatalf("local read: %d prompts, want 68 (2×36 rows, 2×2 bad)", len(want))
	}

	var progress []string
	opts := dataset.Options{Selection: dataset.Selection{Path: "hf://acme/blend"}, OnDownload: func(file string, done, total int64) {
		if done == total {
			progress = append(progress, file)
		}
	}}
	got := hubPrompts(t, opts, snapshotDir(commit1))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("hub read differs from the local read of the same files:\n got %v\nwant %v", ids(got), ids(want))
	}
	if n, err := count(opts); err != nil || n != 72 {
		t.Errorf("Count = %d, %v; want 72 physical rows", n, err)
	}
	if !reflect.DeepEqual(progress, train) {
		t.Errorf("OnDownload completed %v, want %v", progress, train)
	}
	api, cdn := h.calls()
	if countPrefix(api, "/api/datasets/acme/blend/tree/") < 2 {
		t.Errorf("tree listing fetched in %d pages, want several (page size %d): %v", countPrefix(api, "/api/datasets/acme/blend/tree/"), h.pageSize, api)
	}
	if len(cdn) != 2 {
		t.Errorf("CDN served %v, want the two train files once each", cdn)
	}
	id, err := identity(opts)
	if err != nil || id != "hf://acme/blend@"+commit1 {
		t.Errorf("Identity = %q, %v; want hf://acme/blend@%s", id, err, commit1)
	}

	// Second open, Hub up: one revision lookup, no listing, no download.
	h.reset()
	if got := hubPrompts(t, at("hf://acme/blend"), snapshotDir(commit1)); !reflect.DeepEqual(got, want) {
		t.Errorf("second read differs")
	}
	if api, cdn := h.calls(); len(api) != 1 || !strings.Contains(api[0], "/revision/main") || len(cdn) != 0 {
		t.Errorf("second open made API calls %v and CDN calls %v; want only the revision lookup", api, cdn)
	}

	// The Hub gone: the branch resolves from the cache, the pinned path
	// needs no network at all, and so does Identity.
	h.close()
	for _, p := range []string{"hf://acme/blend", "hf://acme/blend@" + commit1, "hf://datasets/acme/blend@" + commit1} {
		t.Run(p, func(t *testing.T) {
			if got := hubPrompts(t, at(p), snapshotDir(commit1)); !reflect.DeepEqual(got, want) {
				t.Errorf("offline read differs")
			}
			if n, err := count(at(p)); err != nil || n != 72 {
				t.Errorf("offline Count = %d, %v", n, err)
			}
			if id, err := identity(at(p)); err != nil || id != "hf://acme/blend@"+commit1 {
				t.Errorf("offline Identity = %q, %v", id, err)
			}
		})
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	if got := hubPrompts(t, at("hf://acme/blend"), snapshotDir(commit1)); !reflect.DeepEqual(got, want) {
		t.Errorf("HF_HUB_OFFLINE read differs")
	}
	if _, err := open(at("hf://acme/blend@v1")); err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE is set") || !errors.Is(err, ErrHubUnreachable) {
		t.Errorf("a tag never resolved here, offline: err = %v", err)
	}
}

// TestHubRevisionPinning moves the branch between two runs: a resumed run
// that pinned the first commit reads the old files, and Identity changes
// exactly when the commit does.
func TestHubRevisionPinning(t *testing.T) {
	h := newFakeHub(t)
	opts := at("hf://acme/blend")
	id1, err := identity(opts)
	if err != nil {
		t.Fatal(err)
	}
	first := hubPrompts(t, at(id1), snapshotDir(commit1))
	if again, err := identity(opts); err != nil || again != id1 {
		t.Errorf("Identity moved without a commit: %q then %q (%v)", id1, again, err)
	}

	h.set(func(h *fakeHub) { h.repos["acme/blend"].refs["main"] = commit2 })
	id2, err := identity(opts)
	if err != nil {
		t.Fatal(err)
	}
	if id2 != "hf://acme/blend@"+commit2 || id2 == id1 {
		t.Errorf("after the branch moved, Identity = %q, want hf://acme/blend@%s", id2, commit2)
	}
	if pinned, err := identity(at(id1)); err != nil || pinned != id1 {
		t.Errorf("Identity of the pinned path = %q, %v; want it unchanged", pinned, err)
	}
	resumed := hubPrompts(t, at(id1), snapshotDir(commit1))
	if !reflect.DeepEqual(resumed, first) {
		t.Errorf("the pinned commit read other rows after the branch moved")
	}
	moved := hubPrompts(t, dataset.Options{Selection: dataset.Selection{Path: "hf://acme/blend", IDField: "uid"}, SourceField: "category"}, snapshotDir(commit2))
	wantIDs := goldenIDs(t, "messages.golden.jsonl")
	if !reflect.DeepEqual(ids(moved), wantIDs) {
		t.Errorf("the moved branch read ids %v, want the new commit's %v", ids(moved), wantIDs)
	}
	// Both commits stay in the cache side by side.
	for _, sha := range []string{commit1, commit2} {
		if _, err := os.Stat(snapshotDir(sha)); err != nil {
			t.Errorf("commit %s not in the cache: %v", sha, err)
		}
	}
}

// TestHubSelectionEndToEnd reads paths and globs inside the repository and
// checks that only the chosen files are downloaded, and only when reached.
func TestHubSelectionEndToEnd(t *testing.T) {
	h := newFakeHub(t)
	tests := []struct {
		path    string
		want    []string // first user turn of each prompt
		wantCDN int
	}{
		{"hf://acme/blend/extra/rows.jsonl", []string{"e0", "e1"}, 0},
		{"hf://acme/blend@v1/extra/*.jsonl", []string{"e0", "e1"}, 0},
		{"hf://acme/blend/data/test-*.parquet", nil, 1},
		{"hf://acme/blend/data", nil, 2},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			h.reset()
			ps, _ := readAll(t, at(tt.path))
			if len(ps) == 0 {
				t.Fatal("no prompts")
			}
			if tt.want != nil {
				var firsts []string
				for _, p := range ps {
					firsts = append(firsts, p.Messages[0].Content)
				}
				if !reflect.DeepEqual(firsts, tt.want) {
					t.Errorf("prompts %v, want %v", firsts, tt.want)
				}
			}
			if _, cdn := h.calls(); len(cdn) > tt.wantCDN {
				t.Errorf("CDN calls %v, want at most %d", cdn, tt.wantCDN)
			}
		})
	}

	// Open reads the first file only; Count under a limit stops early too.
	t.Setenv("SYNTHGEN_CACHE_DIR", t.TempDir())
	h.reset()
	r, err := open(at("hf://acme/blend"))
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if n, err := count(dataset.Options{Selection: dataset.Selection{Path: "hf://acme/blend", Limit: 10}}); err != nil || n != 10 {
		t.Errorf("Count with limit = %d, %v", n, err)
	}
	if _, cdn := h.calls(); len(cdn) != 1 {
		t.Errorf("Open and a limited Count downloaded %v, want the first file only", cdn)
	}
}

// TestHubErrors checks that each refusal says what to do, matches its kind,
// and never shows the token.
func TestHubErrors(t *testing.T) {
	h := newFakeHub(t)
	h.repos["acme/private"] = &fakeRepo{private: true, refs: map[string]string{"main": commit1}, commits: h.repos["acme/blend"].commits}
	h.repos["acme/gated"] = &fakeRepo{gated: true, refs: map[string]string{"main": commit1}, commits: h.repos["acme/blend"].commits}
	closed := httptest.NewServer(http.NotFoundHandler())
	closed.Close()

	tests := []struct {
		name, path, token, endpoint string
		kind                        error
		want                        []string
	}{
		{"private without token", "hf://acme/private", "", "", ErrHubAccess,
			[]string{"gated or private dataset", "set HF_TOKEN", "401"}},
		{"private with a wrong token", "hf://acme/private", "hf_wrong", "", ErrHubAccess,
			[]string{"gated or private dataset", "with the token in HF_TOKEN"}},
		{"missing without token", "hf://acme/nope", "", "", ErrHubAccess,
			[]string{"or no dataset acme/nope", "check the name"}},
		{"missing with token", "hf://acme/nope", "hf_secret_token", "", ErrHubNotFound,
			[]string{"no dataset acme/nope at revision main", "404"}},
		{"missing revision", "hf://acme/blend@nope", "", "", ErrHubNotFound,
			[]string{"no dataset acme/blend at revision nope"}},
		{"gated without token", "hf://acme/gated", "", "", ErrHubAccess,
			[]string{"gated or private dataset", "accept its conditions", "HF_TOKEN", "is restricted"}},
		{"gated, token not granted", "hf://acme/gated", "hf_wrong", "", ErrHubAccess,
			[]string{"gated or private dataset", "authorized list"}},
		{"unreachable", "hf://acme/blend", "hf_secret_token", closed.URL, ErrHubUnreachable,
			[]string{"cannot reach HF_ENDPOINT " + closed.URL, "download the files and point dataset.path at them"}},
		{"no such file", "hf://acme/blend/data/nope.parquet", "", "", nil,
			[]string{"no file or folder data/nope.parquet", "data/train-00000-of-00002.parquet ("}},
		{"glob matches nothing", "hf://acme/blend/*.parquet", "", "", nil,
			[]string{"no files match", "README.md"}},
		{"unsupported file", "hf://acme/blend/README.md", "", "", nil,
			[]string{"unsupported file type"}},
		{"bad path", "hf://acme", "", "", nil,
			[]string{`dataset path "hf://acme"`, "hf://owner/name"}},
		{"bad endpoint", "hf://acme/blend", "", "ftp://mirror", nil,
			[]string{`HF_ENDPOINT "ftp://mirror"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("HF_TOKEN", tt.token)
			t.Setenv("SYNTHGEN_CACHE_DIR", t.TempDir())
			if tt.endpoint != "" {
				t.Setenv("HF_ENDPOINT", tt.endpoint)
			}

			_, err := open(at(tt.path))
			if err == nil {
				t.Fatal("Open succeeded")
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not say %q", err, w)
				}
			}
			if tt.kind != nil && !errors.Is(err, tt.kind) {
				t.Errorf("error %q is not %v", err, tt.kind)
			}
			if tt.token != "" && strings.Contains(err.Error(), tt.token) {
				t.Errorf("error shows the token: %q", err)
			}
			if _, cerr := count(at(tt.path)); cerr == nil || cerr.Error() != err.Error() {
				t.Errorf("Count error %v differs from Open's", cerr)
			}
		})
	}
}

// TestHubFileServerUnreachable: when the Hub answers but the server its
// downloads redirect to does not, the message names that server.
func TestHubFileServerUnreachable(t *testing.T) {
	h := newFakeHub(t)
	h.cdn.Close()
	_, err := open(at("hf://acme/blend"))
	if err == nil || !errors.Is(err, ErrHubUnreachable) {
		t.Fatalf("err = %v, want ErrHubUnreachable", err)
	}
	host := strings.TrimPrefix(h.cdn.URL, "http://")
	for _, w := range []string{"cannot reach " + host + ", where HF_ENDPOINT " + h.api.URL + " keeps the files", "point dataset.path at them"} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("error %q does not say %q", err, w)
		}
	}
	if strings.Contains(err.Error(), "X-Amz-Signature") || strings.Contains(err.Error(), "deadbeef") {
		t.Errorf("error shows the signed URL's query: %q", err)
	}
}

// TestHubToken: HF_TOKEN reaches the Hub's API and resolve endpoints and
// never the CDN, whose signed URLs need none.
func TestHubToken(t *testing.T) {
	h := newFakeHub(t)
	h.repos["acme/private"] = &fakeRepo{private: true, refs: map[string]string{"main": commit1}, commits: h.repos["acme/blend"].commits}
	t.Setenv("HF_TOKEN", h.token)
	if ps, _ := readAll(t, at("hf://acme/private")); len(ps) != 68 {
		t.Fatalf("read %d prompts, want 68", len(ps))
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.apiAuth) == 0 || len(h.cdnAuth) == 0 {
		t.Fatalf("no requests seen: api %v cdn %v", h.apiAuth, h.cdnAuth)
	}
	for i, a := range h.apiAuth {
		if a != "Bearer "+h.token {
			t.Errorf("API request %s had Authorization %q", h.apiCalls[i], a)
		}
	}
	for i, a := range h.cdnAuth {
		if a != "" {
			t.Errorf("CDN request %s got the token", h.cdnCalls[i])
		}
	}
}
