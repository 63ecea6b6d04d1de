package dataset

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fakeFile is a file of a commit of the fake Hub; LFS files are served by
// the CDN after a redirect, like the real Hub's.
type fakeFile struct {
	path string
	data []byte
	lfs  bool
}

type fakeRepo struct {
	private bool // unreadable without the token: 401 RepoNotFound, as the Hub answers
	gated   bool // listing is open, downloads need the token: 401/403 GatedRepo
	refs    map[string]string
	commits map[string][]fakeFile
}

// fakeHub serves the Hub API endpoints synthgen uses, with the real JSON
// shapes, error headers, pagination and redirects to a separate CDN server.
type fakeHub struct {
	t        *testing.T
	api, cdn *httptest.Server
	token    string // the token that can read private and gated repos

	mu       sync.Mutex
	repos    map[string]*fakeRepo
	pageSize int  // tree entries per page
	cut      int  // the CDN closes each response after this many body bytes; 0: never
	corrupt  bool // every file served has one byte flipped
	apiCalls []string
	cdnCalls []string // "sha256 Range"
	apiAuth  []string
	cdnAuth  []string
}

func gitBlobID(b []byte) string {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(b))
	h.Write(b)
	return hex.EncodeToString(h.Sum(nil))
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fakeSHA makes a commit id from a name.
func fakeSHA(name string) string {
	s := sha1.Sum([]byte(name))
	return hex.EncodeToString(s[:])
}

func testdataFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

var (
	commit1 = fakeSHA("commit 1")
	commit2 = fakeSHA("commit 2")
)

// newFakeHub starts the fake with repo acme/blend (main at commit1: two
// train Parquet files, a test split, a JSONL file outside data/, README and
// .gitattributes) and points the environment at it with an empty cache.
func newFakeHub(t *testing.T) *fakeHub {
	t.Helper()
	h := &fakeHub{t: t, token: "hf_secret_token", pageSize: 3, repos: map[string]*fakeRepo{}}
	h.repos["acme/blend"] = &fakeRepo{
		refs: map[string]string{"main": commit1, "v1": commit1},
		commits: map[string][]fakeFile{
			commit1: {
				{path: ".gitattributes", data: []byte("*.parquet filter=lfs diff=lfs merge=lfs -text\n")},
				{path: "README.md", data: []byte("---\nlicense: apache-2.0\n---\n# blend\n")},
				{path: "data/train-00000-of-00002.parquet", data: testdataFile(t, "sharegpt_snappy.parquet"), lfs: true},
				{path: "data/train-00001-of-00002.parquet", data: testdataFile(t, "sharegpt_zstd.parquet"), lfs: true},
				{path: "data/test-00000-of-00001.parquet", data: testdataFile(t, "prompt.parquet"), lfs: true},
				{path: "extra/rows.jsonl", data: []byte(sharegptLine("x", "human", "e0", "gpt", "a") + "\n" + sharegptLine("x", "human", "e1", "gpt", "a") + "\n")},
			},
			commit2: {
				{path: "README.md", data: []byte("# blend v2\n")},
				{path: "data/train-00000-of-00001.parquet", data: testdataFile(t, "messages.parquet"), lfs: true},
			},
		},
	}
	h.api = httptest.NewServer(http.HandlerFunc(h.serveAPI))
	h.cdn = httptest.NewServer(http.HandlerFunc(h.serveCDN))
	t.Cleanup(h.close)
	t.Setenv("HF_ENDPOINT", h.api.URL)
	t.Setenv("SYNTHGEN_CACHE_DIR", t.TempDir())
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	delay := hubRetryDelay
	hubRetryDelay = time.Millisecond
	t.Cleanup(func() { hubRetryDelay = delay })
	return h
}

// close stops both servers: later requests fail as on a machine offline.
func (h *fakeHub) close() {
	h.api.Close()
	h.cdn.Close()
}

func (h *fakeHub) set(f func(h *fakeHub)) {
	h.mu.Lock()
	defer h.mu.Unlock()
	f(h)
}

func (h *fakeHub) calls() (api, cdn []string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]string(nil), h.apiCalls...), append([]string(nil), h.cdnCalls...)
}

func (h *fakeHub) reset() {
	h.set(func(h *fakeHub) { h.apiCalls, h.cdnCalls, h.apiAuth, h.cdnAuth = nil, nil, nil, nil })
}

func hubFail(w http.ResponseWriter, status int, code, msg string) {
	if code != "" {
		w.Header().Set("X-Error-Code", code)
	}
	w.Header().Set("X-Error-Message", msg)
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	json.NewEncoder(w).Encode(map[string]string{"error": msg})
}

// serveAPI routes /api/datasets/O/N/{revision,tree}/... and
// /datasets/O/N/resolve/REV/PATH.
func (h *fakeHub) serveAPI(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.apiCalls = append(h.apiCalls, r.URL.Path)
	h.apiAuth = append(h.apiAuth, r.Header.Get("Authorization"))
	parts := strings.Split(strings.TrimPrefix(r.URL.EscapedPath(), "/"), "/")
	for i, p := range parts {
		parts[i], _ = url.PathUnescape(p)
	}
	isAPI := len(parts) >= 5 && parts[0] == "api" && parts[1] == "datasets"
	isResolve := len(parts) >= 6 && parts[0] == "datasets" && parts[3] == "resolve"
	if !isAPI && !isResolve {
		http.NotFound(w, r)
		return
	}
	if isAPI {
		parts = parts[1:]
	}
	repoID, op, rev, rest := parts[1]+"/"+parts[2], parts[3], parts[4], strings.Join(parts[5:], "/")
	authed := r.Header.Get("Authorization") == "Bearer "+h.token
	repo := h.repos[repoID]
	if repo == nil || (repo.private && !authed) {
		// The Hub does not say whether a repository exists to whoever
		// cannot read it.
		if r.Header.Get("Authorization") == "" || repo != nil {
			hubFail(w, http.StatusUnauthorized, "RepoNotFound", "Invalid username or password.")
		} else {
			hubFail(w, http.StatusNotFound, "RepoNotFound", "Repository not found")
		}
		return
	}
	sha, ok := repo.refs[rev]
	if !ok {
		if _, isCommit := repo.commits[rev]; isCommit {
			sha = rev
		} else {
			hubFail(w, http.StatusNotFound, "RevisionNotFound", "Invalid rev id: "+rev)
			return
		}
	}
	files := repo.commits[sha]
	switch op {
	case "revision":
		var siblings []map[string]string
		for _, f := range files {
			siblings = append(siblings, map[string]string{"rfilename": f.path})
		}
		json.NewEncoder(w).Encode(map[string]any{
			"_id": "66a0c0ffee", "id": repoID, "author": parts[1], "sha": sha,
			"lastModified": "2024-07-28T12:00:00.000Z", "private": repo.private, "gated": repo.gated,
			"disabled": false, "tags": []string{"format:parquet"}, "siblings": siblings,
		})
	case "tree":
		h.serveTree(w, r, repoID, sha, rest, files)
	case "resolve":
		for _, f := range files {
			if f.path != rest {
				continue
			}
			if repo.gated && !authed {
				if r.Header.Get("Authorization") == "" {
					hubFail(w, http.StatusUnauthorized, "GatedRepo", "Access to dataset "+repoID+" is restricted. You must have access to it and be authenticated to access it. Please log in.")
				} else {
					hubFail(w, http.StatusForbidden, "GatedRepo", "Access to dataset "+repoID+" is restricted and you are not in the authorized list.")
				}
				return
			}
			w.Header().Set("X-Repo-Commit", sha)
			if f.lfs {
				w.Header().Set("X-Linked-Etag", `"`+sha256Hex(f.data)+`"`)
				w.Header().Set("X-Linked-Size", strconv.Itoa(len(f.data)))
				http.Redirect(w, r, h.cdn.URL+"/repos/ab/cd/"+sha256Hex(f.data)+"?X-Amz-Signature=deadbeef&Expires=1", http.StatusFound)
				return
			}
			h.serveBytes(w, r, f.data)
			return
		}
		hubFail(w, http.StatusNotFound, "EntryNotFound", "Entry not found")
	default:
		http.NotFound(w, r)
	}
}

// serveTree lists the commit's folders and files under sub, recursively,
// a page at a time with a Link header to the next, as the Hub does.
func (h *fakeHub) serveTree(w http.ResponseWriter, r *http.Request, repoID, sha, sub string, files []fakeFile) {
	type lfs struct {
		OID         string `json:"oid"`
		Size        int    `json:"size"`
		PointerSize int    `json:"pointerSize"`
	}
	type entry struct {
		Type string `json:"type"`
		OID  string `json:"oid"`
		Size int    `json:"size"`
		Path string `json:"path"`
		LFS  *lfs   `json:"lfs,omitempty"`
	}
	var entries []entry
	dirs := map[string]bool{}
	for _, f := range files {
		if sub != "" && !strings.HasPrefix(f.path, sub+"/") {
			continue
		}
		for d := path.Dir(f.path); d != "." && !dirs[d]; d = path.Dir(d) {
			dirs[d] = true
			entries = append(entries, entry{Type: "directory", OID: fakeSHA(d), Path: d})
		}
		e := entry{Type: "file", OID: gitBlobID(f.data), Size: len(f.data), Path: f.path}
		if f.lfs {
			pointer := fmt.Sprintf("version https://git-lfs.github.com/spec/v1\noid sha256:%s\nsize %d\n", sha256Hex(f.data), len(f.data))
			e.OID = gitBlobID([]byte(pointer))
			e.LFS = &lfs{OID: sha256Hex(f.data), Size: len(f.data), PointerSize: len(pointer)}
		}
		entries = append(entries, e)
	}
	start, _ := strconv.Atoi(r.URL.Query().Get("cursor"))
	end := min(start+h.pageSize, len(entries))
	if end < len(entries) {
		next := *r.URL
		q := next.Query()
		q.Set("cursor", strconv.Itoa(end))
		next.RawQuery = q.Encode()
		w.Header().Set("Link", fmt.Sprintf(`<%s%s>; rel="next"`, h.api.URL, next.RequestURI()))
	}
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(entries[min(start, len(entries)):end])
}

// serveCDN serves LFS content by sha256 with Range support; cut and corrupt
// make it misbehave.
func (h *fakeHub) serveCDN(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	defer h.mu.Unlock()
	oid := path.Base(r.URL.Path)
	h.cdnCalls = append(h.cdnCalls, oid+" "+r.Header.Get("Range"))
	h.cdnAuth = append(h.cdnAuth, r.Header.Get("Authorization"))
	if r.URL.Query().Get("X-Amz-Signature") == "" {
		http.Error(w, "unsigned", http.StatusForbidden)
		return
	}
	for _, repo := range h.repos {
		for _, files := range repo.commits {
			for _, f := range files {
				if f.lfs && sha256Hex(f.data) == oid {
					h.serveBytes(w, r, f.data)
					return
				}
			}
		}
	}
	http.NotFound(w, r)
}

// serveBytes answers a GET with an optional "bytes=N-" Range. With cut set it
// declares the full length and closes the connection early.
func (h *fakeHub) serveBytes(w http.ResponseWriter, r *http.Request, data []byte) {
	if h.corrupt {
		data = bytes.Clone(data)
		data[len(data)/2] ^= 0xff
	}
	start := 0
	status := http.StatusOK
	if rg := r.Header.Get("Range"); rg != "" {
		n, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(rg, "bytes="), "-"))
		if err != nil || n >= len(data) {
			w.Header().Set("Content-Range", fmt.Sprintf("bytes */%d", len(data)))
			w.WriteHeader(http.StatusRequestedRangeNotSatisfiable)
			return
		}
		start, status = n, http.StatusPartialContent
		w.Header().Set("Content-Range", fmt.Sprintf("bytes %d-%d/%d", n, len(data)-1, len(data)))
	}
	body := data[start:]
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.Header().Set("Accept-Ranges", "bytes")
	w.WriteHeader(status)
	if h.cut > 0 && len(body) > h.cut {
		body = body[:h.cut]
	}
	w.Write(body)
}

// hubPrompts reads every prompt of opts and returns them with Location made
// relative to root, so reads from the cache and from a local copy compare.
func hubPrompts(t *testing.T, opts Options, root string) []Prompt {
	t.Helper()
	ps, _ := readAll(t, opts)
	for i := range ps {
		ps[i].Location = filepath.ToSlash(strings.TrimPrefix(ps[i].Location, root+string(filepath.Separator)))
	}
	return ps
}

// localCopy writes files of a commit into a fresh directory under their repo
// paths and returns it.
func localCopy(t *testing.T, h *fakeHub, sha string, paths ...string) string {
	t.Helper()
	dir := t.TempDir()
	for _, f := range h.repos["acme/blend"].commits[sha] {
		for _, p := range paths {
			if f.path == p {
				dst := filepath.Join(dir, filepath.FromSlash(p))
				os.MkdirAll(filepath.Dir(dst), 0o755)
				if err := os.WriteFile(dst, f.data, 0o644); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	return dir
}

func snapshotDir(sha string) string {
	return filepath.Join(os.Getenv("SYNTHGEN_CACHE_DIR"), "datasets", "acme", "blend", sha)
}

func countPrefix(calls []string, prefix string) int {
	n := 0
	for _, c := range calls {
		if strings.HasPrefix(c, prefix) {
			n++
		}
	}
	return n
}

// TestHubReadAndCache reads the default selection of a Hub dataset: the two
// train files under data/, giving the same prompts, ids and row locations as
// the same files read locally. A second open downloads nothing, and with the
// Hub gone the cache still serves both the branch and the pinned commit.
func TestHubReadAndCache(t *testing.T) {
	h := newFakeHub(t)
	train := []string{"data/train-00000-of-00002.parquet", "data/train-00001-of-00002.parquet"}
	local := localCopy(t, h, commit1, train...)
	want := hubPrompts(t, Options{Selection: Selection{Path: filepath.Join(local, "data", "train-*.parquet")}}, local)
	if len(want) != 68 {
		t.Fatalf("local read: %d prompts, want 68 (2×36 rows, 2×2 bad)", len(want))
	}

	var progress []string
	opts := Options{Selection: Selection{Path: "hf://acme/blend"}, OnDownload: func(file string, done, total int64) {
		if done == total {
			progress = append(progress, file)
		}
	}}
	got := hubPrompts(t, opts, snapshotDir(commit1))
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("hub read differs from the local read of the same files:\n got %v\nwant %v", ids(got), ids(want))
	}
	if n, err := Count(opts); err != nil || n != 72 {
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
	id, err := Identity(opts)
	if err != nil || id != "hf://acme/blend@"+commit1 {
		t.Errorf("Identity = %q, %v; want hf://acme/blend@%s", id, err, commit1)
	}

	// Second open, Hub up: one revision lookup, no listing, no download.
	h.reset()
	if got := hubPrompts(t, Options{Selection: Selection{Path: "hf://acme/blend"}}, snapshotDir(commit1)); !reflect.DeepEqual(got, want) {
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
			if got := hubPrompts(t, Options{Selection: Selection{Path: p}}, snapshotDir(commit1)); !reflect.DeepEqual(got, want) {
				t.Errorf("offline read differs")
			}
			if n, err := Count(Options{Selection: Selection{Path: p}}); err != nil || n != 72 {
				t.Errorf("offline Count = %d, %v", n, err)
			}
			if id, err := Identity(Options{Selection: Selection{Path: p}}); err != nil || id != "hf://acme/blend@"+commit1 {
				t.Errorf("offline Identity = %q, %v", id, err)
			}
		})
	}
	t.Setenv("HF_HUB_OFFLINE", "1")
	if got := hubPrompts(t, Options{Selection: Selection{Path: "hf://acme/blend"}}, snapshotDir(commit1)); !reflect.DeepEqual(got, want) {
		t.Errorf("HF_HUB_OFFLINE read differs")
	}
	if _, err := Open(Options{Selection: Selection{Path: "hf://acme/blend@v1"}}); err == nil || !strings.Contains(err.Error(), "HF_HUB_OFFLINE is set") || !errors.Is(err, ErrHubUnreachable) {
		t.Errorf("a tag never resolved here, offline: err = %v", err)
	}
}

// TestHubRevisionPinning moves the branch between two runs: a resumed run
// that pinned the first commit reads the old files, and Identity changes
// exactly when the commit does.
func TestHubRevisionPinning(t *testing.T) {
	h := newFakeHub(t)
	opts := Options{Selection: Selection{Path: "hf://acme/blend"}}
	id1, err := Identity(opts)
	if err != nil {
		t.Fatal(err)
	}
	first := hubPrompts(t, Options{Selection: Selection{Path: id1}}, snapshotDir(commit1))
	if again, err := Identity(opts); err != nil || again != id1 {
		t.Errorf("Identity moved without a commit: %q then %q (%v)", id1, again, err)
	}

	h.set(func(h *fakeHub) { h.repos["acme/blend"].refs["main"] = commit2 })
	id2, err := Identity(opts)
	if err != nil {
		t.Fatal(err)
	}
	if id2 != "hf://acme/blend@"+commit2 || id2 == id1 {
		t.Errorf("after the branch moved, Identity = %q, want hf://acme/blend@%s", id2, commit2)
	}
	if pinned, err := Identity(Options{Selection: Selection{Path: id1}}); err != nil || pinned != id1 {
		t.Errorf("Identity of the pinned path = %q, %v; want it unchanged", pinned, err)
	}
	resumed := hubPrompts(t, Options{Selection: Selection{Path: id1}}, snapshotDir(commit1))
	if !reflect.DeepEqual(resumed, first) {
		t.Errorf("the pinned commit read other rows after the branch moved")
	}
	moved := hubPrompts(t, Options{Selection: Selection{Path: "hf://acme/blend", IDField: "uid"}, SourceField: "category"}, snapshotDir(commit2))
	golden := readGolden(t, "messages.golden.jsonl")
	var wantIDs []string
	for _, g := range golden {
		if !g.Bad {
			wantIDs = append(wantIDs, g.ID)
		}
	}
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
			ps, _ := readAll(t, Options{Selection: Selection{Path: tt.path}})
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
	r, err := Open(Options{Selection: Selection{Path: "hf://acme/blend"}})
	if err != nil {
		t.Fatal(err)
	}
	r.Close()
	if n, err := Count(Options{Selection: Selection{Path: "hf://acme/blend", Limit: 10}}); err != nil || n != 10 {
		t.Errorf("Count with limit = %d, %v", n, err)
	}
	if _, cdn := h.calls(); len(cdn) != 1 {
		t.Errorf("Open and a limited Count downloaded %v, want the first file only", cdn)
	}
}

// TestHubDownloadIntegrity: a corrupt or cut download never gets a final
// name; a cut one is resumed with Range, by the next try or the next run.
func TestHubDownloadIntegrity(t *testing.T) {
	const file = "data/test-00000-of-00001.parquet" // prompt.parquet, 1471 bytes
	path := "hf://acme/blend@" + commit1 + "/" + file
	final := func() string { return filepath.Join(snapshotDir(commit1), filepath.FromSlash(file)) }
	size := int64(len(testdataFile(t, "prompt.parquet")))

	t.Run("corrupt LFS file", func(t *testing.T) {
		h := newFakeHub(t)
		h.set(func(h *fakeHub) { h.corrupt = true })
		_, err := Open(Options{Selection: Selection{Path: path}})
		if err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), "discarded") {
			t.Fatalf("err = %v, want a sha256 mismatch", err)
		}
		for _, p := range []string{final(), final() + ".incomplete"} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind after a corrupt download: %v", p, err)
			}
		}
		h.set(func(h *fakeHub) { h.corrupt = false })
		readAll(t, Options{Selection: Selection{Path: path}})
	})

	t.Run("corrupt git file", func(t *testing.T) {
		h := newFakeHub(t)
		h.set(func(h *fakeHub) { h.corrupt = true })
		_, err := Open(Options{Selection: Selection{Path: "hf://acme/blend/extra/rows.jsonl"}})
		if err == nil || !strings.Contains(err.Error(), "git blob id") {
			t.Fatalf("err = %v, want a git blob id mismatch", err)
		}
	})

	t.Run("cut transfers resume within one open", func(t *testing.T) {
		h := newFakeHub(t)
		h.set(func(h *fakeHub) { h.cut = 600 })
		ps, _ := readAll(t, Options{Selection: Selection{Path: path}})
		if len(ps) == 0 {
			t.Fatal("no prompts")
		}
		_, cdn := h.calls()
		oid := sha256Hex(testdataFile(t, "prompt.parquet"))
		want := []string{oid + " ", oid + " bytes=600-", oid + " bytes=1200-"}
		if !reflect.DeepEqual(cdn, want) {
			t.Errorf("CDN requests %q, want %q", cdn, want)
		}
	})

	t.Run("cut transfers resume in the next run", func(t *testing.T) {
		h := newFakeHub(t)
		h.set(func(h *fakeHub) { h.cut = 100 })
		_, err := Open(Options{Selection: Selection{Path: path}})
		wantGot := int64(hubAttempts * 100)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("after %d of %d bytes", wantGot, size)) {
			t.Fatalf("err = %v, want a cut after %d of %d bytes", err, wantGot, size)
		}
		if _, err := os.Stat(final()); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("a cut download got its final name: %v", err)
		}
		if st, err := os.Stat(final() + ".incomplete"); err != nil || st.Size() != wantGot {
			t.Errorf("partial download kept for resume: %v, %v", st, err)
		}
		h.set(func(h *fakeHub) { h.cut = 0 })
		h.reset()
		readAll(t, Options{Selection: Selection{Path: path}})
		if _, cdn := h.calls(); len(cdn) != 1 || !strings.HasSuffix(cdn[0], fmt.Sprintf("bytes=%d-", wantGot)) {
			t.Errorf("next run asked the CDN %q, want one resume at %d", cdn, wantGot)
		}
	})

	t.Run("garbage left by a crash is redownloaded", func(t *testing.T) {
		newFakeHub(t)
		os.MkdirAll(filepath.Dir(final()), 0o755)
		if err := os.WriteFile(final()+".incomplete", bytes.Repeat([]byte{0}, 700), 0o644); err != nil {
			t.Fatal(err)
		}
		readAll(t, Options{Selection: Selection{Path: path}})
		if b, err := os.ReadFile(final()); err != nil || !bytes.Equal(b, testdataFile(t, "prompt.parquet")) {
			t.Errorf("cached file is not the Hub's file: %v", err)
		}
	})

	t.Run("truncated cache file is redownloaded", func(t *testing.T) {
		newFakeHub(t)
		readAll(t, Options{Selection: Selection{Path: path}})
		if err := os.Truncate(final(), 10); err != nil {
			t.Fatal(err)
		}
		readAll(t, Options{Selection: Selection{Path: path}})
		if st, err := os.Stat(final()); err != nil || st.Size() != size {
			t.Errorf("cache file not repaired: %v, %v", st, err)
		}
	})
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

			_, err := Open(Options{Selection: Selection{Path: tt.path}})
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
			if _, cerr := Count(Options{Selection: Selection{Path: tt.path}}); cerr == nil || cerr.Error() != err.Error() {
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
	_, err := Open(Options{Selection: Selection{Path: "hf://acme/blend"}})
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
	if ps, _ := readAll(t, Options{Selection: Selection{Path: "hf://acme/private"}}); len(ps) != 68 {
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

// TestHubDefaultSelection covers the rules that choose files when the path
// names only the dataset (or a folder), on listings shaped like real ones.
func TestHubDefaultSelection(t *testing.T) {
	files := func(paths ...string) []hubFile {
		var out []hubFile
		for _, p := range paths {
			out = append(out, hubFile{Path: p, Size: 1000})
		}
		return out
	}
	perfectblend := files(".gitattributes", "README.md",
		"data/train-00000-of-00006.parquet", "data/train-00001-of-00006.parquet", "data/train-00002-of-00006.parquet",
		"data/train-00003-of-00006.parquet", "data/train-00004-of-00006.parquet", "data/train-00005-of-00006.parquet")
	tests := []struct {
		name  string
		sub   string
		files []hubFile
		want  []string
		err   []string
	}{
		{"open-perfectblend", "", perfectblend, []string{
			"data/train-00000-of-00006.parquet", "data/train-00001-of-00006.parquet", "data/train-00002-of-00006.parquet",
			"data/train-00003-of-00006.parquet", "data/train-00004-of-00006.parquet", "data/train-00005-of-00006.parquet"}, nil},
		{"train and test under data", "", files("data/test-00000-of-00001.parquet", "data/train-00000-of-00001.parquet", "README.md"),
			[]string{"data/train-00000-of-00001.parquet"}, nil},
		{"split folders", "", files("data/train/0.jsonl", "data/train/1.jsonl", "data/validation/0.jsonl"),
			[]string{"data/train/0.jsonl", "data/train/1.jsonl"}, nil},
		{"root files with splits", "", files("train.jsonl.gz", "test.jsonl.gz", "dataset_infos.json"),
			[]string{"train.jsonl.gz"}, nil},
		{"data/ preferred over the root", "", files("sample.jsonl", "data/all.jsonl"),
			[]string{"data/all.jsonl"}, nil},
		{"no splits: all files", "", files("b.jsonl", "a.jsonl", ".hidden/c.jsonl", "dataset_info.json"),
			[]string{"a.jsonl", "b.jsonl"}, nil},
		{"a folder", "data", files("data/train-0.parquet", "data/test-0.parquet", "other/train.jsonl"),
			[]string{"data/train-0.parquet"}, nil},
		{"a file", "data/test-0.parquet", files("data/train-0.parquet", "data/test-0.parquet"),
			[]string{"data/test-0.parquet"}, nil},
		{"a glob", "data/*-0.parquet", files("data/train-0.parquet", "data/test-0.parquet", "data/x/train-0.parquet"),
			[]string{"data/test-0.parquet", "data/train-0.parquet"}, nil},
		{"split and no split", "", files("train.jsonl", "extra.jsonl"), nil,
			[]string{"cannot choose the files to read", "no split: extra.jsonl", "train: train.jsonl", "e.g. hf://o/n@" + commit1 + "/extra.jsonl or hf://o/n@" + commit1 + "/train.jsonl"}},
		{"two splits, no train", "", files("data/test-0.parquet", "data/test-1.parquet", "data/validation-0.parquet"), nil,
			[]string{"test: data/test-0.parquet", "validation: data/validation-0.parquet", "hf://o/n@" + commit1 + "/data/test-*.parquet"}},
		{"parquet and jsonl", "", files("data/rows.jsonl", "data/rows.parquet"), nil,
			[]string{"json: data/rows.jsonl", "parquet: data/rows.parquet"}},
		{"no data files", "", files("README.md", "blend.py"), nil,
			[]string{"no .parquet, .jsonl or .json files", "README.md (1000 B)", "hf://o/n@refs/convert/parquet"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			sel, err := selectHubFiles(hubRef{repo: "o/n", rev: commit1, path: tt.sub}, tt.files)
			if tt.err != nil {
				if err == nil {
					t.Fatalf("selected %v, want an error", sel)
				}
				for _, w := range tt.err {
					if !strings.Contains(err.Error(), w) {
						t.Errorf("error %q does not say %q", err, w)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, f := range sel {
				got = append(got, f.Path)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Errorf("selected %v, want %v", got, tt.want)
			}
		})
	}
}

func TestParseHubPath(t *testing.T) {
	tests := []struct {
		in   string
		want hubRef
		err  bool
	}{
		{"hf://mlabonne/open-perfectblend", hubRef{repo: "mlabonne/open-perfectblend"}, false},
		{"hf://mlabonne/open-perfectblend/", hubRef{repo: "mlabonne/open-perfectblend"}, false},
		{"hf://datasets/mlabonne/open-perfectblend@v1.0/data/train-*.parquet", hubRef{repo: "mlabonne/open-perfectblend", rev: "v1.0", path: "data/train-*.parquet"}, false},
		{"hf://o/n@refs/convert/parquet/default/train", hubRef{repo: "o/n", rev: "refs/convert/parquet", path: "default/train"}, false},
		{"hf://o/n@refs%2Fpr%2F3", hubRef{repo: "o/n", rev: "refs/pr/3"}, false},
		{"hf://o/n@feature%2Fx/a.jsonl", hubRef{repo: "o/n", rev: "feature/x", path: "a.jsonl"}, false},
		{"hf://o/n@" + commit1, hubRef{repo: "o/n", rev: commit1}, false},
		{"hf://o", hubRef{}, true},
		{"hf://o/n@", hubRef{}, true},
		{"hf://o/../n", hubRef{}, true},
		{"hf://o/n/../../etc/passwd", hubRef{}, true},
		{"hf://o/n/a//b", hubRef{}, true},
		{"hf://o/n@refs/pr", hubRef{}, true},
		{"hf://o/n@a..b", hubRef{}, true},
		{"hf://o/n m", hubRef{}, true},
		{"data/x.jsonl", hubRef{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseHubPath(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.in) {
					t.Errorf("error %q does not name the path", err)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if again, err := parseHubPath(got.String()); err != nil || again != got {
				t.Errorf("String() %q reads back as %+v, %v", got.String(), again, err)
			}
		})
	}
}

// FuzzParseHubPath: no panic; an accepted path reads back from its
// canonical form, and its parts stay inside a cache directory.
func FuzzParseHubPath(f *testing.F) {
	for _, s := range []string{"hf://o/n", "hf://datasets/o/n@main/data/*.parquet", "hf://o/n@refs/pr/1/x", "hf://o/n@%2e%2e/x", "hf://o/n/../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := parseHubPath(s)
		if err != nil {
			return
		}
		again, err := parseHubPath(ref.String())
		if err != nil || again != ref {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, ref, ref.String(), again, err)
		}
		base := filepath.Join("cache", "datasets")
		p := filepath.Join(base, filepath.FromSlash(ref.repo), "sha")
		if ref.path != "" && !strings.ContainsAny(ref.path, "*?[") {
			p = filepath.Join(p, filepath.FromSlash(ref.path))
		}
		if rel, err := filepath.Rel(base, p); err != nil || !filepath.IsLocal(rel) {
			t.Fatalf("%q escapes the cache: %s", s, p)
		}
	})
}

// FuzzDecodeTreePage: the listing decides where downloads are written, so
// no accepted file may point outside the snapshot directory.
func FuzzDecodeTreePage(f *testing.F) {
	f.Add([]byte(`[{"type":"directory","oid":"x","size":0,"path":"data"},{"type":"file","oid":"ab","size":3,"path":"data/a.parquet","lfs":{"oid":"cd","size":3,"pointerSize":130}}]`))
	f.Add([]byte(`[{"type":"file","path":"../x","size":1}]`))
	f.Add([]byte(`[{"type":"file","path":"/etc/x","size":-1}]`))
	f.Add([]byte(`{}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		files, err := decodeTreePage(data)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "tree listing") {
				t.Fatalf("error %q does not say what it read", err)
			}
			return
		}
		base := filepath.Join("cache", "sha")
		for _, fl := range files {
			p := filepath.Join(base, filepath.FromSlash(fl.Path))
			if rel, err := filepath.Rel(base, p); err != nil || !filepath.IsLocal(rel) || rel == "." {
				t.Fatalf("file %q escapes the snapshot: %s", fl.Path, p)
			}
			if fl.size() < 0 {
				t.Fatalf("file %q has size %d", fl.Path, fl.size())
			}
		}
	})
}

func TestNextLink(t *testing.T) {
	base, _ := url.Parse("https://huggingface.co/api/datasets/o/n/tree/main?recursive=true")
	tests := []struct{ in, want string }{
		{`<https://huggingface.co/api/datasets/o/n/tree/main?recursive=true&cursor=abc>; rel="next"`, "https://huggingface.co/api/datasets/o/n/tree/main?recursive=true&cursor=abc"},
		{`</api/x?cursor=2>; rel=next, <https://h/prev>; rel="prev"`, "https://huggingface.co/api/x?cursor=2"},
		{`<https://h/prev>; rel="prev"`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		got, err := nextLink([]string{tt.in}, base)
		if err != nil || got != tt.want {
			t.Errorf("nextLink(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}

// BenchmarkHubDownload measures a download from the fake CDN on loopback,
// with its verification (sha256) and the rename into the cache.
func BenchmarkHubDownload(b *testing.B) {
	data := bytes.Repeat([]byte("synthgen parquet bytes "), 8<<20/23)
	f := hubFile{Path: "data/big.parquet", Size: int64(len(data)), LFS: &hubLFS{OID: sha256Hex(data), Size: int64(len(data))}}
	cdn := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.ServeContent(w, r, "big.parquet", time.Time{}, bytes.NewReader(data))
	}))
	defer cdn.Close()
	api := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, cdn.URL+"/blob?sig=1", http.StatusFound)
	}))
	defer api.Close()
	b.Setenv("HF_ENDPOINT", api.URL)
	b.Setenv("SYNTHGEN_CACHE_DIR", b.TempDir())
	c, err := newHubClient(nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	pinned := hubRef{repo: "o/n", rev: commit1}
	dst := c.localPath("o/n", commit1, f.Path)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		os.Remove(dst)
		if err := c.fetch(pinned, f); err != nil {
			b.Fatal(err)
		}
	}
}

// TestHubTreeListing: a listing paginated over several pages holds every
// file of the commit once, in path order, folders left out.
func TestHubTreeListing(t *testing.T) {
	h := newFakeHub(t)
	c, err := newHubClient(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	files, err := c.tree(hubRef{repo: "acme/blend"}, commit1)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, f := range files {
		got = append(got, f.Path)
	}
	want := make([]string, 0, len(h.repos["acme/blend"].commits[commit1]))
	for _, f := range h.repos["acme/blend"].commits[commit1] {
		want = append(want, f.path)
	}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Errorf("listing %v, want %v", got, want)
	}
}
