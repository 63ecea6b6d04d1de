// Package hub reads datasets straight from the Hugging Face Hub for package
// dataset: its Remote is the dataset.Remote of hf:// paths. It is a package
// of its own so that dataset, and what needs only dataset's types (inspect's
// and export's job and plan), links no HTTP client; the programs that read
// hf:// paths set dataset.Options.Remote to Remote{}. A path of the form
//
//	hf://owner/name[@revision][/path-or-glob]
//
// is resolved through the Hub's HTTP API to one commit, its files are
// downloaded once into a local cache, and dataset's Reader reads the cached
// files like a local glob. The Hub endpoints used are the ones
// huggingface_hub uses:
//
//	GET {HF_ENDPOINT}/api/datasets/{owner}/{name}/revision/{revision}   → {"sha": ...}
//	GET {HF_ENDPOINT}/api/datasets/{owner}/{name}/tree/{sha}?recursive=true
//	    → [{"type":"file","path":...,"size":...,"oid":<git sha1>,"lfs":{"oid":<sha256>,"size":...}}, ...]
//	    paginated with a Link: <...>; rel="next" header
//	GET {HF_ENDPOINT}/datasets/{owner}/{name}/resolve/{sha}/{path}      → the bytes, after a redirect to a CDN
//
// hub.go is the entry (Remote) and the errors; path.go the hf:// grammar;
// env.go the settings; http.go the HTTP client and its retries; tree.go the
// commit and its file list; split.go which files a path selects;
// download.go the downloads.
package hub

import (
	"context"
	"errors"
	"fmt"

	"github.com/synthgen/synthgen/dataset"
)

const (
	hubScheme          = "hf://"
	defaultHubEndpoint = "https://huggingface.co"
	defaultRevision    = "main"
)

// Errors a caller can tell apart with errors.Is, e.g. to choose a hint. The
// messages that wrap them already say what to do.
var (
	// ErrHubUnreachable: the Hub could not be reached and the cache could
	// not stand in for it.
	ErrHubUnreachable = errors.New("hugging face hub unreachable")
	// ErrHubAccess: the Hub refused the request (401/403): a gated or
	// private dataset, or a token without access.
	ErrHubAccess = errors.New("gated or private dataset")
	// ErrHubNotFound: no such dataset, revision or file (404).
	ErrHubNotFound = errors.New("not found on the hugging face hub")
)

// hubError is an error with an exact message for a person and a kind for
// errors.Is.
type hubError struct {
	kind  error
	msg   string
	cause error
}

func (e *hubError) Error() string        { return e.msg }
func (e *hubError) Is(target error) bool { return target == e.kind }
func (e *hubError) Unwrap() error        { return e.cause }

// Remote reads hf:// paths from the Hugging Face Hub, with the settings
// (HF_ENDPOINT, HF_TOKEN, HF_HUB_OFFLINE, HF_HOME, SYNTHGEN_CACHE_DIR) read
// from the environment at each call. The zero value is ready to use.
type Remote struct{}

var _ dataset.Remote = Remote{}

// Identity resolves path's revision to its commit and returns path pinned
// to it, as dataset.Identity says.
func (Remote) Identity(ctx context.Context, path string) (string, error) {
	ref, err := parseHubPath(path)
	if err != nil {
		return "", err
	}
	c, err := newHubClient(ctx, nil)
	if err != nil {
		return "", err
	}
	sha, err := c.commit(ref)
	if err != nil {
		return "", err
	}
	ref.rev = sha
	return ref.String(), nil
}

// Resolve lists the files of path's commit that it selects, as paths in
// the cache, and a fetch that downloads one of them unless it is there.
func (Remote) Resolve(ctx context.Context, path string, onDownload func(file string, done, total int64)) ([]string, func(string) error, error) {
	ref, err := parseHubPath(path)
	if err != nil {
		return nil, nil, err
	}
	c, err := newHubClient(ctx, onDownload)
	if err != nil {
		return nil, nil, err
	}
	sha, err := c.commit(ref)
	if err != nil {
		return nil, nil, err
	}
	listing, err := c.tree(ref, sha)
	if err != nil {
		return nil, nil, err
	}
	pinned := hubRef{repo: ref.repo, rev: sha, path: ref.path}
	// Messages name the path as the user wrote it; the files are the
	// commit's.
	sel, err := selectHubFiles(ref, listing)
	if err != nil {
		return nil, nil, err
	}
	byPath := make(map[string]hubFile, len(sel))
	paths := make([]string, len(sel))
	for i, f := range sel {
		paths[i] = c.localPath(ref.repo, sha, f.Path)
		byPath[paths[i]] = f
	}
	fetch := func(p string) error {
		f, ok := byPath[p]
		if !ok {
			return fmt.Errorf("dataset %s: %s is not one of its files", pinned, p)
		}
		return c.fetch(pinned, f)
	}
	return paths, fetch, nil
}
