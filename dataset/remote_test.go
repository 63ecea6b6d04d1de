package dataset

import (
	"context"
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// fakeRemote serves one hf:// path from local files and records what it
// was asked.
type fakeRemote struct {
	path    string   // the one path it knows
	files   []string // what path reads
	pinned  string   // what Identity answers for path
	fetched []string
	ctx     context.Context
	onDL    bool // Resolve got an onDownload
}

var _ Remote = (*fakeRemote)(nil)

var errNoSuchPath = errors.New("no such path")

func (f *fakeRemote) Resolve(ctx context.Context, path string, onDownload func(string, int64, int64)) ([]string, func(string) error, error) {
	f.ctx, f.onDL = ctx, onDownload != nil
	if path != f.path && path != f.pinned {
		return nil, nil, errNoSuchPath
	}
	return f.files, func(p string) error {
		f.fetched = append(f.fetched, p)
		return nil
	}, nil
}

func (f *fakeRemote) Identity(ctx context.Context, path string) (string, error) {
	f.ctx = ctx
	if path != f.path {
		return "", errNoSuchPath
	}
	return f.pinned, nil
}

// TestRemoteReadsHubPaths: Open, Count and Identity reach an hf:// path
// only through Options.Remote, with the caller's context (a nil one
// becomes Background, never nil), and fetch each file before reading it.
func TestRemoteReadsHubPaths(t *testing.T) {
	dir := t.TempDir()
	a := writeFile(t, dir, "a.jsonl", `{"prompt":"a0"}`+"\n"+`{"prompt":"a1"}`+"\n")
	b := writeFile(t, dir, "b.jsonl", `{"prompt":"b0"}`+"\n")
	const pinned = "hf://o/n@0123456789abcdef0123456789abcdef01234567"
	r := &fakeRemote{path: "hf://o/n", files: []string{a, b}, pinned: pinned}

	type ctxKey struct{}
	ctx := context.WithValue(context.Background(), ctxKey{}, "run")
	opts := Options{Selection: Selection{Path: "hf://o/n"}, Remote: r, Context: ctx, OnDownload: func(string, int64, int64) {}}
	id, err := Identity(opts)
	if err != nil || id != pinned {
		t.Fatalf("Identity = %q, %v; want %q", id, err, pinned)
	}
	if r.ctx.Value(ctxKey{}) != "run" {
		t.Errorf("Identity did not pass the caller's context on")
	}
	ps, _ := readAll(t, opts)
	if got := ids(ps); !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("read ids %v, want 0 1 2", got)
	}
	if !slices.Equal(r.fetched, []string{a, b}) {
		t.Errorf("fetched %v before reading, want %v", r.fetched, []string{a, b})
	}
	if !r.onDL || r.ctx.Value(ctxKey{}) != "run" {
		t.Errorf("Resolve got onDownload %v and not the caller's context", r.onDL)
	}

	// The pinned revision is what is read; a nil context is Background.
	r.fetched = nil
	opts = Options{Selection: Selection{Path: "hf://o/n", Revision: pinned, Limit: 2}, Remote: r}
	if n, err := Count(opts); err != nil || n != 2 {
		t.Errorf("Count = %d, %v; want 2", n, err)
	}
	if r.ctx == nil {
		t.Errorf("Resolve got a nil context")
	}
	if !slices.Equal(r.fetched, []string{a}) {
		t.Errorf("a Count under the limit fetched %v, want the first file only", r.fetched)
	}

	// The Remote's errors come back as they are.
	opts = Options{Selection: Selection{Path: "hf://o/other"}, Remote: r}
	if _, err := Open(opts); !errors.Is(err, errNoSuchPath) {
		t.Errorf("Open: %v, want the Remote's error", err)
	}

	// Local paths never reach it.
	r.ctx = nil
	if _, err := Count(Options{Selection: Selection{Path: filepath.Join(dir, "*.jsonl")}, Remote: r}); err != nil || r.ctx != nil {
		t.Errorf("a local glob: %v, Remote asked %v", err, r.ctx != nil)
	}
}

// TestHubPathWithoutRemote: a program that sets no Remote gets an error
// naming the path, not a panic, from each entry point; a local path needs
// none.
func TestHubPathWithoutRemote(t *testing.T) {
	const path = "hf://acme/blend@main/data/*.parquet"
	opts := Options{Selection: Selection{Path: path}}
	check := func(what string, err error) {
		t.Helper()
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "Options.Remote") {
			t.Errorf("%s: %v; want an error naming %s and Options.Remote", what, err, path)
		}
	}
	_, err := Open(opts)
	check("Open", err)
	_, err = Count(opts)
	check("Count", err)
	_, err = Identity(opts)
	check("Identity", err)
	if c, err := Stamp(opts); err != nil || c != nil {
		t.Errorf("Stamp = %v, %v; want nil, nil (an hf:// dataset has no Content)", c, err)
	}
	local := writeFile(t, t.TempDir(), "a.jsonl", `{"prompt":"a"}`+"\n")
	if id, err := Identity(Options{Selection: Selection{Path: local}}); err != nil || id != local {
		t.Errorf("Identity(%s) = %q, %v; want it unchanged", local, id, err)
	}
}
