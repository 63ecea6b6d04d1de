//go:build unix

package sink

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/synthgen/synthgen/sink/layout"
	"syscall"
)

// LockName is the lock file inside the output directory. Two processes
// appending to one directory would each skip only what they saw at start and
// write the same keys twice, so Open takes an exclusive flock on it. The
// kernel drops the lock when the process dies, so a crash never leaves the
// directory locked.
const LockName = layout.LockName

func lockDir(dir string) (*os.File, error) {
	path := filepath.Join(dir, LockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock output dir: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		defer f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			if h, ok := readHolder(f); ok {
				return nil, fmt.Errorf("output dir %s is in use by synthgen pid %d on %s; wait for it to end, or stop it", dir, h.PID, h.Hostname)
			}
			// Locked, but the holder has not written itself yet (or is an
			// older synthgen, which did not).
			return nil, fmt.Errorf("output dir %s is in use by another synthgen run (%s is locked); wait for it to end, or stop it", dir, path)
		}
		return nil, fmt.Errorf("lock %s: %w", path, err)
	}
	writeHolder(f)
	return f, nil
}

// lockHolder is what the process holding the lock writes into the lock
// file, so that the one refused can name it. It is advisory: the flock
// alone decides who writes.
type lockHolder struct {
	PID      int    `json:"pid"`
	Hostname string `json:"hostname"`
}

// writeHolder records this process in the locked file. A failure only
// costs the next refused run the holder's name, so it is not an error.
func writeHolder(f *os.File) {
	host, _ := os.Hostname()
	b, _ := json.Marshal(lockHolder{PID: os.Getpid(), Hostname: host})
	if f.Truncate(0) != nil {
		return
	}
	if _, err := f.WriteAt(append(b, '\n'), 0); err != nil {
		return
	}
	_ = f.Sync()
}

// readHolder reads what the lock's holder wrote; false when it wrote
// nothing readable.
func readHolder(f *os.File) (lockHolder, bool) {
	b, err := io.ReadAll(io.LimitReader(f, 4096))
	var h lockHolder
	if err != nil || json.Unmarshal(b, &h) != nil || h.PID <= 0 {
		return lockHolder{}, false
	}
	if h.Hostname == "" {
		h.Hostname = "an unknown host"
	}
	return h, true
}

// Holder is the synthgen process holding an output directory's lock.
type Holder struct {
	PID      int    // 0 when the holder has not written itself (an older synthgen)
	Hostname string // "" with PID 0
}

func (h Holder) String() string {
	if h.PID == 0 {
		return "another synthgen run"
	}
	return fmt.Sprintf("synthgen pid %d on %s", h.PID, h.Hostname)
}

// HeldBy reports whether a run holds dir's lock now, and who, without
// writing to dir: the lock file is opened read-only (none: no run has held
// it, nor holds it) and a shared lock tried at once and released. The
// answer is for a reader (inspect, export) to say what it reads: a run that
// starts or ends a moment later changes it.
func HeldBy(dir string) (Holder, bool, error) {
	f, err := os.Open(filepath.Join(dir, LockName))
	if errors.Is(err, os.ErrNotExist) {
		return Holder{}, false, nil
	}
	if err != nil {
		return Holder{}, false, err
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		if !errors.Is(err, syscall.EWOULDBLOCK) {
			return Holder{}, false, fmt.Errorf("lock %s: %w", f.Name(), err)
		}
		h, _ := readHolder(f)
		return Holder(h), true, nil
	}
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	return Holder{}, false, nil
}
