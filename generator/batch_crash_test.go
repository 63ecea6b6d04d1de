package generator

// The batch mode stopped right after the ledger records each state of a
// batch, as a kill there would stop it: the goroutine that wrote the state
// ends at once (runtime.Goexit) and the run is cancelled; after collected,
// which the run's close writes, the directory is copied as it is on disk
// at that instant and the resume runs on the copy. The resume completes
// the job: every row once on disk, and no custom_id submitted twice.

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/generator/batch"
)

func TestBatchCrashAtEveryState(t *testing.T) {
	for _, state := range []batch.State{batch.StateIntended, batch.StateUploaded, batch.StateSubmitted, batch.StateDownloaded, batch.StateCollected} {
		t.Run(string(state), func(t *testing.T) {
			t.Parallel()
			m, ts := newMock(t)
			dir := t.TempDir()
			s := batchSetup(t, ts.URL, dir, 25)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			var once sync.Once
			stopped := false
			copyDir := filepath.Join(t.TempDir(), "out")
			s.Batch.Moved = func(e batch.Entry) {
				if e.State != state {
					return
				}
				if state == batch.StateCollected {
					// Written by the run's close, with the output closed:
					// the directory now is the disk of a kill right here.
					once.Do(func() { stopped = true; copyTree(t, s.Dir, copyDir) })
					return
				}
				var first bool
				once.Do(func() { first = true })
				if first {
					stopped = true
					cancel()
					runtime.Goexit() // this batch goes no further, as killed
				}
			}
			runBatch(t, ctx, s)
			if !stopped {
				t.Fatalf("the run never recorded a batch %s", state)
			}
			out := s.Dir
			if state == batch.StateCollected {
				out = copyDir
			}
			es, err := batch.ReadLedger(out)
			if err != nil || len(es) == 0 {
				t.Fatalf("ledger after the stop: %+v (%v)", es, err)
			}
			r := batchSetup(t, ts.URL, dir, 25)
			r.Dir = out
			if res := runBatch(t, context.Background(), r); res.Outcome != OutcomeDone {
				t.Fatalf("resume: outcome %s, want done", res.Outcome)
			}
			checkOnce(t, m, out, 25)
			if es, err = batch.ReadLedger(out); err != nil {
				t.Fatal(err)
			}
			for _, e := range es {
				if e.State != batch.StateCollected {
					t.Errorf("after the resume, batch %d is %s, want collected", e.Number, e.State)
				}
			}
		})
	}
}

// copyTree copies the regular files under src to dst, as they are.
func copyTree(t *testing.T, src, dst string) {
	err := filepath.WalkDir(src, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(src, p)
		to := filepath.Join(dst, rel)
		if d.IsDir() {
			return os.MkdirAll(to, 0o755)
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		return os.WriteFile(to, b, 0o644)
	})
	if err != nil {
		t.Error(err)
	}
}
