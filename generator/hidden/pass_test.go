package hidden

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/synthgen/synthgen/internal/diskfault"
	"github.com/synthgen/synthgen/mockserver/hiddenstates"
)

// TestPassKeepsEveryUnitOnce: 60 records (a fifth of them two-turn
// conversations) against a connector writing 5% mismatched token ids and
// 5% NaN files, with the files of generation requests in its directory
// too: every unit ends with one kept file, checked, and the server's
// directory is swept clean.
func TestPassKeepsEveryUnitOnce(t *testing.T) {
	out := writeRun(t, 60)
	srv, cfg := connector(t, hiddenstates.Options{RateMismatch: 0.05, RateNaN: 0.05, Seed: 7})
	for i := range 5 { // what the generation requests left on a connector server
		if _, err := srv.Begin([]int64{1, 2, int64(i)}); err != nil {
			t.Fatal(err)
		}
	}
	srv.Wait()
	c0 := srv.Counts()
	res := run(t, out, cfg)
	if res.Units != 72 || res.Kept != 72 || res.Skipped != 0 || len(res.Failed) != 0 {
		t.Fatalf("result %+v, want 72 units kept", res)
	}
	c := srv.Counts()
	if c.Mismatched == c0.Mismatched || c.NaN == c0.NaN {
		t.Fatalf("server counts %+v: the faults were not exercised", c)
	}
	if want := int64(72) + c.Mismatched - c0.Mismatched + c.NaN - c0.NaN; c.Requests != want {
		t.Errorf("%d requests, want one per unit plus one per bad file (%d)", c.Requests, want)
	}
	checkKept(t, out)
	if left := leftovers(t, cfg.Dir); len(left) != 0 {
		t.Errorf("server directory not swept: %v", left)
	}
	var tokens int64
	us, _ := Units(out)
	for _, u := range us {
		tokens += int64(len(u.IDs))
	}
	if want := tokens * BytesPerToken(testLayers, testHidden); res.Projected != want {
		t.Errorf("projected %d bytes, want %d tokens × %d", res.Projected, tokens, BytesPerToken(testLayers, testHidden))
	}
	again := run(t, out, cfg)
	if again.Kept != 0 || again.Skipped != 72 || srv.Counts().Requests != c.Requests {
		t.Errorf("second pass %+v asked the server again", again)
	}
}

type killed struct{ step string }

// TestKillAtEachStep stops an extraction after each step as kill -9 would
// (a panic out of the hook, nothing after it runs), then resumes: the unit
// ends with one kept file, and a unit marked before the kill is not asked
// again.
func TestKillAtEachStep(t *testing.T) {
	for _, step := range []string{StepAnswered, StepLockWaited, StepMoved, StepMarked} {
		t.Run(step, func(t *testing.T) {
			out := writeRun(t, 3)
			srv, cfg := connector(t, hiddenstates.Options{})
			us, err := Units(out)
			if err != nil {
				t.Fatal(err)
			}
			log, err := Recover(out)
			if err != nil {
				t.Fatal(err)
			}
			x := NewExtractor(cfg, out, log)
			x.Hook = func(s, _ string) {
				if s == step {
					panic(killed{s})
				}
			}
			func() {
				defer func() {
					if r := recover(); r == nil {
						t.Fatal("the hook never ran")
					} else if _, ok := r.(killed); !ok {
						panic(r)
					}
				}()
				_, _ = x.Extract(context.Background(), us[0])
			}()
			log.Close()
			srv.Wait()
			before := srv.Counts().Requests
			res := run(t, out, cfg)
			asked := srv.Counts().Requests - before
			wantAsked := int64(len(us))
			if step == StepMarked {
				wantAsked-- // kept before the kill: never extracted again
			}
			if asked != wantAsked || res.Kept != int(wantAsked) {
				t.Errorf("resume asked %d units and kept %d, want %d", asked, res.Kept, wantAsked)
			}
			checkKept(t, out)
			if left := leftovers(t, cfg.Dir); len(left) != 0 {
				t.Errorf("server directory not swept: %v", left)
			}
		})
	}
}

// TestDiskFull: ENOSPC while moving a file in stops the pass at once, with
// only kept files in the folder; a pass after the disk is freed finishes.
func TestDiskFull(t *testing.T) {
	out := writeRun(t, 10)
	_, cfg := connector(t, hiddenstates.Options{})
	moves := 0
	restore := diskfault.Set(func(op, path string) error {
		if strings.Contains(path, string(filepath.Separator)+DirName+string(filepath.Separator)) {
			moves++
			if moves > 3 {
				return syscall.ENOSPC
			}
		}
		return nil
	})
	cfg.Workers = 1
	res, err := Run(context.Background(), out, cfg, Hooks{})
	restore()
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Run = %v, want ENOSPC", err)
	}
	if res.Kept != 3 || len(res.Failed) != 0 {
		t.Errorf("result %+v, want 3 kept and no failure recorded for a full disk", res)
	}
	res = run(t, out, cfg)
	if res.Skipped != 3 || res.Kept != 9 {
		t.Errorf("after the disk is freed: %+v", res)
	}
	checkKept(t, out)
}

// TestLockNeverReleased: a server that never finishes a file is given up on
// after LockWait, as a failure naming the lock, and no file is kept.
func TestLockNeverReleased(t *testing.T) {
	out := writeRun(t, 1)
	hold := make(chan struct{})
	_, cfg := connector(t, hiddenstates.Options{Hold: hold})
	t.Cleanup(func() { close(hold) })
	cfg.Attempts, cfg.LockWait = 2, 20e6
	res, err := Run(context.Background(), out, cfg, Hooks{})
	if err != nil {
		t.Fatal(err)
	}
	if res.Kept != 0 || len(res.Failed) != 1 || !strings.Contains(res.Failed[0].Cause, "still held") {
		t.Fatalf("result %+v, want one failure naming the held lock", res)
	}
	b, err := os.ReadFile(filepath.Join(out, DirName, FailedName))
	if err != nil || !strings.Contains(string(b), "still held") {
		t.Errorf("%s: %q, %v", FailedName, b, err)
	}
}

// TestFileDeletedUnderTheJob: the server's file vanishes between the lock
// and the check: the attempt fails and the next one keeps a good file.
func TestFileDeletedUnderTheJob(t *testing.T) {
	out := writeRun(t, 1)
	_, cfg := connector(t, hiddenstates.Options{})
	log, err := Recover(out)
	if err != nil {
		t.Fatal(err)
	}
	us, _ := Units(out)
	x := NewExtractor(cfg, out, log)
	deleted := 0
	x.Hook = func(s, _ string) {
		if s == StepLockWaited && deleted == 0 {
			for _, n := range leftovers(t, cfg.Dir) {
				if strings.HasSuffix(n, ".safetensors") {
					os.Remove(filepath.Join(cfg.Dir, n))
					deleted++
				}
			}
		}
	}
	if _, err := x.Extract(context.Background(), us[0]); err != nil {
		t.Fatalf("Extract: %v", err)
	}
	log.Close()
	if deleted != 1 {
		t.Fatalf("deleted %d files", deleted)
	}
	checkKept(t, out)
}

// TestRefusesWithoutSpace: a projection past the free space is refused at
// start, naming the number, before any request.
func TestRefusesWithoutSpace(t *testing.T) {
	out := writeRun(t, 2)
	srv, cfg := connector(t, hiddenstates.Options{})
	cfg.Layers, cfg.HiddenSize = 1<<24, 1<<24
	res, err := Run(context.Background(), out, cfg, Hooks{})
	if err == nil || !strings.Contains(err.Error(), fmt.Sprint(res.Projected)) || !strings.Contains(err.Error(), "free") {
		t.Fatalf("Run = %v, want a refusal naming %d bytes", err, res.Projected)
	}
	if srv.Counts().Requests != 0 {
		t.Errorf("%d requests sent before the refusal", srv.Counts().Requests)
	}
}
