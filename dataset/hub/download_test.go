package hub

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"
)

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
		_, err := open(at(path))
		if err == nil || !strings.Contains(err.Error(), "sha256") || !strings.Contains(err.Error(), "discarded") {
			t.Fatalf("err = %v, want a sha256 mismatch", err)
		}
		for _, p := range []string{final(), final() + ".incomplete"} {
			if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("%s left behind after a corrupt download: %v", p, err)
			}
		}
		h.set(func(h *fakeHub) { h.corrupt = false })
		readAll(t, at(path))
	})

	t.Run("corrupt git file", func(t *testing.T) {
		h := newFakeHub(t)
		h.set(func(h *fakeHub) { h.corrupt = true })
		_, err := open(at("hf://acme/blend/extra/rows.jsonl"))
		if err == nil || !strings.Contains(err.Error(), "git blob id") {
			t.Fatalf("err = %v, want a git blob id mismatch", err)
		}
	})

	t.Run("cut transfers resume within one open", func(t *testing.T) {
		h := newFakeHub(t)
		h.set(func(h *fakeHub) { h.cut = 600 })
		ps, _ := readAll(t, at(path))
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
		_, err := open(at(path))
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
		readAll(t, at(path))
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
		readAll(t, at(path))
		if b, err := os.ReadFile(final()); err != nil || !bytes.Equal(b, testdataFile(t, "prompt.parquet")) {
			t.Errorf("cached file is not the Hub's file: %v", err)
		}
	})

	t.Run("truncated cache file is redownloaded", func(t *testing.T) {
		newFakeHub(t)
		readAll(t, at(path))
		if err := os.Truncate(final(), 10); err != nil {
			t.Fatal(err)
		}
		readAll(t, at(path))
		if st, err := os.Stat(final()); err != nil || st.Size() != size {
			t.Errorf("cache file not repaired: %v, %v", st, err)
		}
	})
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
	c, err := newHubClient(context.Background(), nil)
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
