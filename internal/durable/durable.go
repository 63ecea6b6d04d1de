// Package durable writes files and directories so that they survive a crash
// or a power loss: a file replaced atomically, a directory entry fsynced,
// a new directory tree whose every entry is fsynced. Every error is checked
// and names the path it is about.
package durable

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Hook, when not nil, runs before every step that changes the disk or makes
// a change durable, with the step's name and path:
//
//	create PATH     before the temporary of an atomic write of PATH is created
//	write TMP       before the data goes to the temporary
//	fsync TMP       before the temporary is fsynced
//	rename TMP      before the temporary takes the final name
//	syncdir DIR     before a directory is fsynced
//	mkdir DIR       before the directories up to DIR are created
//
// Crash tests panic in it to stop between two steps, as kill -9 would, and
// record the order of the steps to check what a power loss could reorder.
// The package-level functions use no hook.
type Hook func(op, path string)

func (h Hook) step(op, path string) {
	if h != nil {
		h(op, path)
	}
}

// WriteFile is Hook(nil).WriteFile.
func WriteFile(path string, data []byte, perm os.FileMode) error {
	return Hook(nil).WriteFile(path, data, perm)
}

// SyncDir is Hook(nil).SyncDir.
func SyncDir(dir string) error { return Hook(nil).SyncDir(dir) }

// MkdirAll is Hook(nil).MkdirAll.
func MkdirAll(dir string) error { return Hook(nil).MkdirAll(dir) }

// WriteFile replaces path with data so that a reader (or a restart after a
// crash) sees either the old content or the new one, never a mix. The data
// goes to a temporary file in the same directory (same filesystem, so the
// rename is atomic) whose name starts with "." and ends with ".tmp", never
// with a final suffix such as .json: a crash leaves only a hidden leftover,
// not a half-written file under a name readers trust. The file is fsynced
// before the rename and the directory after it, so the rename itself
// survives a power loss. The directory must exist.
func (h Hook) WriteFile(path string, data []byte, perm os.FileMode) error {
	f, err := h.Create(path, perm)
	if err != nil {
		return err
	}
	if _, err := f.Write(data); err != nil {
		f.Abort()
		return err
	}
	return f.Commit()
}

// File is a file written under a temporary name and given its final name
// by Commit, the way WriteFile writes one, for data too large to hold in
// memory: a reader, or a restart after a crash or a kill, sees the old
// file or the complete new one, never a part.
type File struct {
	h         Hook
	f         *os.File
	path, tmp string
	perm      os.FileMode
	done      bool
}

// Create starts the atomic write of path (see WriteFile): Write to it, then
// Commit, or Abort to leave path as it was. The directory must exist.
func Create(path string, perm os.FileMode) (*File, error) { return Hook(nil).Create(path, perm) }

// CreateTemp is Create with the temporary named by pattern, as
// os.CreateTemp takes it, in path's directory: for a caller that must
// recognize its own temporaries. The pattern must keep them out of the
// names readers trust (start with "." and end with ".tmp", as Create's do).
func CreateTemp(path, pattern string, perm os.FileMode) (*File, error) {
	return Hook(nil).create(path, pattern, perm)
}

// Create is the package-level Create with h's steps.
func (h Hook) Create(path string, perm os.FileMode) (*File, error) {
	return h.create(path, "."+filepath.Base(path)+".*.tmp", perm)
}

func (h Hook) create(path, pattern string, perm os.FileMode) (*File, error) {
	dir := filepath.Dir(path)
	h.step("create", path)
	f, err := os.CreateTemp(dir, pattern)
	if err != nil {
		return nil, fmt.Errorf("write %s: %w", path, err)
	}
	h.step("write", f.Name())
	return &File{h: h, f: f, path: path, tmp: f.Name(), perm: perm}, nil
}

// Write appends to the temporary file.
func (f *File) Write(p []byte) (int, error) {
	n, err := f.f.Write(p)
	if err != nil {
		return n, fmt.Errorf("write %s: %w", f.tmp, err)
	}
	return n, nil
}

// Commit gives the file its permissions, fsyncs it, renames it to its final
// name and fsyncs the directory. On an error the temporary is removed.
func (f *File) Commit() (err error) {
	if f.done {
		return fmt.Errorf("write %s: already committed or aborted", f.path)
	}
	f.done = true
	defer func() {
		if err != nil {
			_ = f.f.Close()
			_ = os.Remove(f.tmp)
		}
	}()
	// CreateTemp makes 0600 files; the caller's perm is what the final file gets.
	if err = f.f.Chmod(f.perm); err != nil {
		return fmt.Errorf("chmod %s: %w", f.tmp, err)
	}
	f.h.step("fsync", f.tmp)
	if err = f.f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", f.tmp, err)
	}
	if err = f.f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", f.tmp, err)
	}
	f.h.step("rename", f.tmp)
	if err = os.Rename(f.tmp, f.path); err != nil {
		return fmt.Errorf("rename %s: %w", f.tmp, err)
	}
	return f.h.SyncDir(filepath.Dir(f.path))
}

// Abort removes the temporary file; the final name is untouched. It does
// nothing after Commit.
func (f *File) Abort() {
	if f.done {
		return
	}
	f.done = true
	_ = f.f.Close()
	_ = os.Remove(f.tmp)
}

// MkdirAll is os.MkdirAll (mode 0755) that also fsyncs the parent of every
// directory it creates: a new directory's entry must be durable before the
// files inside it count as durable after a power loss.
func (h Hook) MkdirAll(dir string) error {
	var created []string
	for d := filepath.Clean(dir); ; d = filepath.Dir(d) {
		if _, err := os.Lstat(d); !errors.Is(err, fs.ErrNotExist) {
			break
		}
		created = append(created, d)
		if filepath.Dir(d) == d {
			break
		}
	}
	h.step("mkdir", dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := h.SyncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// SyncDir fsyncs a directory so that the renames, creations and removals of
// its entries are durable, not only the file contents.
func (h Hook) SyncDir(dir string) error {
	h.step("syncdir", dir)
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	err = d.Sync()
	if cerr := d.Close(); err == nil {
		err = cerr
	}
	// Some filesystems refuse fsync on a directory (EINVAL); there is nothing
	// more durable to ask for there, so that one error is not a failure.
	if err != nil && !errors.Is(err, syscall.EINVAL) {
		return fmt.Errorf("fsync dir %s: %w", dir, err)
	}
	return nil
}
