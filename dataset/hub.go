package dataset

// The hub*.go files read datasets straight from the Hugging Face Hub. A
// path of the form
//
//	hf://owner/name[@revision][/path-or-glob]
//
// is resolved through the Hub's HTTP API to one commit, its files are
// downloaded once into a local cache, and the Reader reads the cached files
// like a local glob. The Hub endpoints used are the ones huggingface_hub uses:
//
//	GET {HF_ENDPOINT}/api/datasets/{owner}/{name}/revision/{revision}   → {"sha": ...}
//	GET {HF_ENDPOINT}/api/datasets/{owner}/{name}/tree/{sha}?recursive=true
//	    → [{"type":"file","path":...,"size":...,"oid":<git sha1>,"lfs":{"oid":<sha256>,"size":...}}, ...]
//	    paginated with a Link: <...>; rel="next" header
//	GET {HF_ENDPOINT}/datasets/{owner}/{name}/resolve/{sha}/{path}      → the bytes, after a redirect to a CDN
//
// hub.go is the entry (Identity, resolveFiles) and the errors; hub_path.go
// the hf:// grammar; hub_env.go the settings; hub_http.go the HTTP client and
// its retries; hub_tree.go the commit and its file list; hub_split.go which
// files a path selects; hub_download.go the downloads.

import (
	"errors"
	"fmt"
	"strings"
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

// isHubPath reports whether a dataset path names a Hub dataset.
func isHubPath(p string) bool { return strings.HasPrefix(p, hubScheme) }

// Identity names exactly the data that Options.Path reads, so that a run's
// manifest can record it and a resume can tell whether the data moved.
//
// For hf:// paths it resolves the revision (a branch or tag; main when none
// is given) to its commit and returns the pinned path
// "hf://owner/name@<40-hex sha>[/path-or-glob]". That string is itself a valid
// Options.Path that reads the same files in the same order, with no network
// once they are cached: set Options.Path to it before Count and Open so both
// read one commit even if the branch moves meanwhile, and store it so that a
// resume reads what the first run read. When the Hub cannot be reached, the
// commit the revision had when it was last resolved on this machine is used.
//
// Local paths have no revision: Identity returns them unchanged (their
// contents are not hashed).
func Identity(opts Options) (string, error) {
	if !isHubPath(opts.Path) {
		return opts.Path, nil
	}
	ref, err := parseHubPath(opts.Path)
	if err != nil {
		return "", err
	}
	c, err := newHubClient(opts.Context, opts.OnDownload)
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

// fetcher makes sure the file at a path that resolveFiles returned is on
// disk; nil for local datasets.
type fetcher func(path string) error

// resolveFiles turns Options.Path into the files to read in order, and for
// hf:// paths a fetcher that downloads each one when it is first needed:
// Open downloads only the files it reaches, and Count only those it counts
// before Limit.
func resolveFiles(o Options) ([]string, fetcher, error) {
	if !isHubPath(o.Path) {
		files, err := resolve(o.Path)
		return files, nil, err
	}
	ref, err := parseHubPath(o.Path)
	if err != nil {
		return nil, nil, err
	}
	c, err := newHubClient(o.Context, o.OnDownload)
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
