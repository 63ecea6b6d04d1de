package sink

import (
	"errors"
	"fmt"
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
	if _, err = f.Write(data); err != nil {
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	// CreateTemp makes 0600 files; the caller's perm is what the final file gets.
	if err = f.Chmod(perm); err != nil {
		return fmt.Errorf("chmod %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	if err = os.Rename(tmp, path); err != nil {
		return fmt.Errorf("rename %s: %w", tmp, err)
	}
	return syncDir(dir)
}

// syncDir fsyncs a directory so that the renames, creations and removals of
// its entries are durable, not only the file contents.
func syncDir(dir string) error {
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
