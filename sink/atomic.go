package sink

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// WriteFileAtomic replaces path with data so that a reader (or a restart
// after a crash) sees either the old content or the new one, never a mix.
// The data goes to a temporary file in the same directory (same filesystem,
// so the rename is atomic) whose name starts with "." and ends with ".tmp",
// never with a final suffix such as .json: a crash leaves only a hidden
// leftover, not a half-written file under a name readers trust. The file is
// fsynced before the rename and the directory after it, so the rename itself
// survives a power loss.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) (err error) {
	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	step("create", path)
	f, err := os.CreateTemp(dir, "."+base+".*.tmp")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	step("write", tmp)
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	// CreateTemp makes 0600 files; the caller's perm is what the final file gets.
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	step("fsync", tmp)
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	step("rename", tmp)
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(dir)
}

// mkdirAllDurable is os.MkdirAll that also fsyncs the parent of every
// directory it creates: a new directory's entry must be durable before the
// files inside it count as durable after a power loss.
func mkdirAllDurable(dir string) error {
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
	step("mkdir", dir)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, d := range created {
		if err := syncDir(filepath.Dir(d)); err != nil {
			return err
		}
	}
	return nil
}

// syncDir fsyncs a directory so that the renames, creations and removals of
// its entries are durable, not only the file contents.
func syncDir(dir string) error {
	step("syncdir", dir)
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

// stepHook, when a test sets it, runs before every step that changes the
// disk or makes a change durable (create, write, fsync, rename, remove,
// truncate, directory fsync). The crash tests panic in it to stop the
// process between any two such steps, as kill -9 would, and record the
// order of the steps to check what power loss could reorder.
var stepHook func(op, path string)

func step(op, path string) {
	if stepHook != nil {
		stepHook(op, path)
	}
}
