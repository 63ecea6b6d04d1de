package dataset

// A commit's file listing (the tree API, paginated).

import (
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"
)

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

// Default selection. Without a path after the name, the files read are:
//  1. the files whose type the reader supports (.parquet, .jsonl, .ndjson,
//     .json, and .gz/.zst of the JSON ones), leaving out hidden paths and the
//     metadata files of the datasets library (dataset_info.json, ...);
//  2. of those, the ones under data/ when there are any (the Hub's layout);
//  3. grouped by split, read from the path as the datasets library does
//     (train, validation/valid/val/dev, test/eval, as a word between - _ . /
//     or digits): one group is taken whole; several are narrowed to train
//     when every file has a split;
//  4. what remains must be all Parquet or all JSON.
//
// Anything else is ambiguous: the error lists what was found and suggests a
// glob. A path naming a folder applies the same rules inside it; a file is
// read alone; a glob (* ? [ ], not crossing /) reads what it matches.
