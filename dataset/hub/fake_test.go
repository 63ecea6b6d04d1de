package hub

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synthgen/synthgen/dataset"
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
func hubPrompts(t *testing.T, opts dataset.Options, root string) []dataset.Prompt {
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
