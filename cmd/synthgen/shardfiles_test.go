package main

import (
	"bytes"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/internal/readcount"
)

// fileDataset writes files part-000.jsonl ... under a directory of its
// own, file i holding 1 + i%3 rows of pad bytes each, and returns the glob
// and the files' absolute paths.
func fileDataset(t *testing.T, files, pad int, rows func(i int) int) (string, []string) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "prompts")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	var paths []string
	for i := range files {
		var b strings.Builder
		for r := range rows(i) {
			fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"file %d row %d %s"}]}`+"\n", i, r, strings.Repeat("x", pad))
		}
		p := filepath.Join(dir, fmt.Sprintf("part-%03d.jsonl", i))
		if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
			t.Fatal(err)
		}
		paths = append(paths, p)
	}
	return filepath.Join(dir, "part-*.jsonl"), paths
}

// TestShardByFilePartitionsTheJob: a dataset of 24 files run as 24 workers
// with --shard i/24 and dataset.shard_by files. Each worker opens and reads
// its own file and no other (the bytes read from each file are counted);
// the 24 directories hold every key of the dataset exactly once between
// them, each worker the keys of its file; and one export of the 24
// directories is byte for byte the export of a single process running the
// whole job split by file.
func TestShardByFilePartitionsTheJob(t *testing.T) {
	t.Parallel()
	const files = 24 // a worker a file: more only repeat the same run
	rows := func(i int) int { return 1 + i%3 }
	glob, paths := fileDataset(t, files, 0, rows)
	_, url := cliMock(t, nil)
	root := t.TempDir()
	byFile := []string{"--dataset.shard_by", "files"}

	var dirs []string
	owner := map[string]int{}
	for i := range files {
		j := cliJob{baseURL: url, data: glob, dir: filepath.Join(root, "shard-"+strconv.Itoa(i))}
		c, stop := readcount.Start()
		res := cliRun(t, j.args(append(byFile, "--shard", fmt.Sprintf("%d/%d", i, files))...)...)
		stop()
		res.ok(t, "run "+j.dir)
		dirs = append(dirs, j.dir)
		read, opened := c.Bytes(), c.Opened()
		for f, p := range paths {
			abs, _ := filepath.Abs(p)
			if f == i {
				if read[abs] == 0 {
					t.Errorf("worker %d read nothing of its file %s", i, p)
				}
				continue
			}
			if read[abs] != 0 || opened[abs] != 0 {
				t.Errorf("worker %d opened %s (%d times, %d bytes), another worker's file", i, p, opened[abs], read[abs])
			}
		}
		for id, n := range cliRecords(t, j.dir) {
			if n != 1 {
				t.Errorf("worker %d wrote id %s %d times", i, id, n)
			}
			if w, dup := owner[id]; dup {
				t.Errorf("id %s is in worker %d's directory and in worker %d's", id, w, i)
			}
			owner[id] = i
			if want := fmt.Sprintf("part-%03d.jsonl:", i); !strings.HasPrefix(id, want) {
				t.Errorf("worker %d wrote id %s, not of its file %s", i, id, want)
			}
		}
	}
	want := 0
	for i := range files {
		for r := range rows(i) {
			want++
			if _, ok := owner[fmt.Sprintf("part-%03d.jsonl:%d", i, r)]; !ok {
				t.Errorf("row %d of file %d is in no worker's directory", r, i)
			}
		}
	}
	if len(owner) != want {
		t.Errorf("%d ids across the workers, want the dataset's %d", len(owner), want)
	}

	single := cliJob{baseURL: url, data: glob, dir: filepath.Join(root, "single")}
	cliRun(t, single.args(byFile...)...).ok(t, "single run")
	export := func(dirs ...string) []byte {
		t.Helper()
		out := filepath.Join(t.TempDir(), "train.jsonl")
		cliRun(t, append(append([]string{"export"}, dirs...), "--format", "specforge", "--out", out, "--keep-truncated")...).ok(t, "export")
		data, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return data
	}
	one, all := export(single.dir), export(dirs...)
	if n := bytes.Count(one, []byte("\n")); n != want {
		t.Fatalf("the single run's export has %d rows, want %d", n, want)
	}
	if !bytes.Equal(all, one) {
		t.Errorf("the export of the workers' directories differs from the single run's (%d vs %d bytes)", len(all), len(one))
	}
	// inspect reads the workers' directories as one job, complete.
	res := cliRun(t, append([]string{"inspect", "--json"}, dirs...)...)
	res.ok(t, "inspect of the workers' directories")
	if !strings.Contains(res.stdout, fmt.Sprintf(`"selected_keys": %d`, want)) {
		t.Errorf("inspect of the workers' directories does not count the %d keys of the job:\n%.2000s", want, res.stdout)
	}
}

// TestResumeByFileReadsNoStampAgain: a worker that finished its files, run
// again on them unchanged with a larger dataset.limit, sends its first
// request having read no more of its files than the reader's first buffer
// up to that row: its stamps and row counts come from its manifest, on
// trust (same path, size, modification time, inode). With --rehash every
// byte is hashed again before the first request.
func TestResumeByFileReadsNoStampAgain(t *testing.T) {
	const pad = 1000
	glob, paths := fileDataset(t, 2, pad, func(int) int { return 3000 }) // 2 files of 3 MB
	var total int64
	for _, p := range paths {
		st, _ := os.Stat(p)
		total += st.Size()
	}
	var (
		mu    sync.Mutex
		c     *readcount.Counter
		first map[string]int64 // bytes read by the first request of the run
	)
	_, url := cliMock(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			mu.Lock()
			if c != nil && first == nil && r.URL.Path == "/v1/chat/completions" {
				first = c.Bytes()
			}
			mu.Unlock()
			h.ServeHTTP(w, r)
		})
	})
	j := cliJob{baseURL: url, data: glob, dir: filepath.Join(t.TempDir(), "worker")}
	args := func(limit int, extra ...string) []string {
		return j.args(append([]string{"--dataset.shard_by", "files", "--shard", "0/1", "--dataset.limit", strconv.Itoa(limit)}, extra...)...)
	}
	cliRun(t, args(2)...).ok(t, "first run")
	readBefore := func(limit int, extra ...string) int64 {
		t.Helper()
		mu.Lock()
		var stop func()
		c, stop = readcount.Start()
		first = nil
		mu.Unlock()
		res := cliRun(t, args(limit, extra...)...)
		stop()
		res.ok(t, "resume")
		mu.Lock()
		defer mu.Unlock()
		if first == nil {
			t.Fatal("the resume sent no request")
		}
		var n int64
		for _, p := range paths {
			abs, _ := filepath.Abs(p)
			n += first[abs]
		}
		c = nil
		return n
	}
	if n := readBefore(4); n > 512<<10 {
		t.Errorf("the resume read %d bytes of its files (%d in all) before its first request; want at most the reader's first buffer", n, total)
	}
	if n := readBefore(6, "--rehash"); n < total {
		t.Errorf("with --rehash the resume read %d bytes before its first request, want every byte (%d)", n, total)
	}
}
