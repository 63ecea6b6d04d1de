package hub

// A revision's commit and the commit's file list, both kept in the cache.

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	"github.com/synthgen/synthgen/internal/durable"
)

// commit resolves the ref's revision to a commit id and remembers it, so
// that when the Hub cannot be reached later the cache can still be used.
func (c *hubClient) commit(ref hubRef) (string, error) {
	if isCommitSHA(ref.rev) {
		return strings.ToLower(ref.rev), nil
	}
	refFile := filepath.Join(c.repoDir(ref.repo), "refs", url.PathEscape(ref.revision()))
	cached := func() (string, bool) {
		b, err := os.ReadFile(refFile)
		sha := strings.TrimSpace(string(b))
		return sha, err == nil && isCommitSHA(sha)
	}
	if c.offline {
		if sha, ok := cached(); ok {
			return sha, nil
		}
		return "", &hubError{kind: ErrHubUnreachable, msg: fmt.Sprintf(
			"%s: HF_HUB_OFFLINE is set and revision %s was never resolved on this machine (cache %s): unset it, or give the commit as hf://%s@<sha>",
			ref, ref.revision(), c.cacheDir, ref.repo)}
	}
	u := c.endpoint + "/api/datasets/" + ref.repo + "/revision/" + url.PathEscape(ref.revision())
	body, _, err := c.getAPI(ref, u)
	if err != nil {
		if sha, ok := cached(); ok && errors.Is(err, ErrHubUnreachable) {
			return sha, nil
		}
		return "", err
	}
	var info struct {
		SHA string `json:"sha"`
	}
	if err := json.Unmarshal(body, &info); err != nil || !isCommitSHA(info.SHA) {
		return "", fmt.Errorf("%s: %s answered no commit sha for revision %s (is HF_ENDPOINT a Hub?)", ref, c.endpoint, ref.revision())
	}
	sha := strings.ToLower(info.SHA)
	if err := writeCacheFile(refFile, []byte(sha+"\n")); err != nil {
		return "", fmt.Errorf("%s: cache: %w", ref, err)
	}
	return sha, nil
}

// hubFile is one file of a commit, as the tree API lists it.
type hubFile struct {
	Path string  `json:"path"`
	Size int64   `json:"size"`
	OID  string  `json:"oid"` // the git blob id: sha1 of "blob SIZE\0" + content
	LFS  *hubLFS `json:"lfs,omitempty"`
}

// hubLFS describes a file stored in LFS (or Xet): OID is the sha256 of its
// content.
type hubLFS struct {
	OID  string `json:"oid"`
	Size int64  `json:"size"`
}

func (f hubFile) size() int64 {
	if f.LFS != nil {
		return f.LFS.Size
	}
	return f.Size
}

// decodeTreePage reads one page of the tree API and keeps its files. A path
// that could leave the cache directory or a negative size is an error: the
// listing decides where files are written.
func decodeTreePage(data []byte) ([]hubFile, error) {
	var entries []struct {
		Type string `json:"type"`
		hubFile
	}
	if err := json.Unmarshal(data, &entries); err != nil {
		return nil, fmt.Errorf("tree listing: %w", err)
	}
	var files []hubFile
	for i, e := range entries {
		if e.Type != "file" {
			continue
		}
		p := e.Path
		if p == "" || path.Clean(p) != p || !filepath.IsLocal(filepath.FromSlash(p)) || strings.ContainsAny(p, "\\\x00") {
			return nil, fmt.Errorf("tree listing: entry %d: path %q: not a relative path", i, p)
		}
		if e.Size < 0 || (e.LFS != nil && e.LFS.Size < 0) {
			return nil, fmt.Errorf("tree listing: entry %d: %s: negative size", i, p)
		}
		files = append(files, e.hubFile)
	}
	return files, nil
}

// tree lists the files of a commit, from the cache when it was listed
// before: a commit's files never change.
func (c *hubClient) tree(ref hubRef, sha string) ([]hubFile, error) {
	cache := filepath.Join(c.repoDir(ref.repo), "trees", sha+".json")
	if b, err := os.ReadFile(cache); err == nil {
		var files []hubFile
		if err := json.Unmarshal(b, &files); err == nil {
			return files, nil
		}
	}
	pinned := hubRef{repo: ref.repo, rev: sha, path: ref.path}
	if c.offline {
		return nil, &hubError{kind: ErrHubUnreachable, msg: fmt.Sprintf(
			"%s: HF_HUB_OFFLINE is set and this commit's file list is not in the cache %s", pinned, c.cacheDir)}
	}
	var files []hubFile
	seen := map[string]bool{}
	for u := c.endpoint + "/api/datasets/" + ref.repo + "/tree/" + sha + "?recursive=true&expand=false"; u != ""; {
		if seen[u] {
			return nil, fmt.Errorf("%s: tree listing: the page %s links to itself", pinned, u)
		}
		seen[u] = true
		body, next, err := c.getAPI(pinned, u)
		if err != nil {
			return nil, err
		}
		page, err := decodeTreePage(body)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", pinned, err)
		}
		files = append(files, page...)
		u = next
	}
	sort.Slice(files, func(i, j int) bool { return files[i].Path < files[j].Path })
	b, err := json.Marshal(files)
	if err != nil {
		return nil, err
	}
	if err := writeCacheFile(cache, b); err != nil {
		return nil, fmt.Errorf("%s: cache: %w", pinned, err)
	}
	return files, nil
}

// writeCacheFile writes a small cache file atomically and durably, creating
// its directory, so that readers see the old content or the new, never a
// part.
func writeCacheFile(p string, data []byte) error {
	if err := durable.MkdirAll(filepath.Dir(p)); err != nil {
		return err
	}
	return durable.WriteFile(p, data, 0o600)
}
