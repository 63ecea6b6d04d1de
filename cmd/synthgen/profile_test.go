package main

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// The developer's hook writes both profiles and passes the command's own
// error through untouched.
func TestProfiledWritesProfiles(t *testing.T) {
	dir := t.TempDir()
	cpu, mem := filepath.Join(dir, "cpu.prof"), filepath.Join(dir, "mem.prof")
	t.Setenv(cpuProfileEnv, cpu)
	t.Setenv(memProfileEnv, mem)
	want := errors.New("the command's own error")
	if err := profiled(func() error { return want }); err != want {
		t.Fatalf("profiled returned %v, want the command's error", err)
	}
	for _, p := range []string{cpu, mem} {
		st, err := os.Stat(p)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() == 0 {
			t.Errorf("%s is empty", p)
		}
	}
	if !slices.Contains(otherEnv, cpuProfileEnv) || !slices.Contains(otherEnv, memProfileEnv) {
		t.Errorf("otherEnv %v lacks the hook's variables: run would warn about them", otherEnv)
	}
}

// A profile that cannot be created does not keep the command from running.
func TestProfiledUnwritablePath(t *testing.T) {
	t.Setenv(cpuProfileEnv, filepath.Join(t.TempDir(), "no", "such", "dir", "cpu.prof"))
	ran := false
	if err := profiled(func() error { ran = true; return nil }); err != nil || !ran {
		t.Fatalf("ran %v, err %v: the command must run without its profile", ran, err)
	}
}
