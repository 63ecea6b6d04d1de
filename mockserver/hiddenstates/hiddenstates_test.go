package hiddenstates

import (
	"os"
	"testing"

	"golang.org/x/sys/unix"
)

// lockHeld reports whether another descriptor holds path's flock.
func lockHeld(t *testing.T, path string) bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := unix.Flock(int(f.Fd()), unix.LOCK_SH|unix.LOCK_NB); err != nil {
		return true
	}
	_ = unix.Flock(int(f.Fd()), unix.LOCK_UN)
	return false
}

// TestLockHeldWhileWriting: Begin returns with the lock held and no file;
// the file appears whole only when the lock is released, which stays on
// disk, as the connector does.
func TestLockHeldWhileWriting(t *testing.T) {
	gate := make(chan struct{})
	s := New(Options{Dir: t.TempDir(), Gate: func(int64) { <-gate }})
	path, err := s.Begin([]int64{1, 2, 3})
	if err != nil {
		t.Fatal(err)
	}
	if !lockHeld(t, path+".lock") {
		t.Fatal("the lock is free before the file is written")
	}
	if _, err := os.Stat(path); err == nil {
		t.Fatal("the file exists while its lock is held")
	}
	close(gate)
	s.Wait()
	if lockHeld(t, path+".lock") {
		t.Error("the lock is still held once the file is written")
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Errorf("file: %v", err)
	}
	if c := s.Counts(); c.Files != 1 {
		t.Errorf("counts %+v", c)
	}
}
