package hub

import (
	"context"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
)

// TestHubTreeListing: a listing paginated over several pages holds every
// file of the commit once, in path order, folders left out.
func TestHubTreeListing(t *testing.T) {
	h := newFakeHub(t)
	c, err := newHubClient(context.Background(), nil)
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
