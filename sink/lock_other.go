//go:build !unix

package sink

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/synthgen/synthgen/sink/layout"
)

// LockName is the lock file inside the output directory. On systems without
// flock it is created but not locked: do not run two synthgen processes on
// one output directory there.
const LockName = layout.LockName

func lockDir(dir string) (*os.File, error) {
	f, err := os.OpenFile(filepath.Join(dir, LockName), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("lock output dir: %w", err)
	}
	return f, nil
}

// Holder is the synthgen process holding an output directory's lock.
type Holder struct {
	PID      int
	Hostname string
}

func (h Holder) String() string { return "another synthgen run" }

// HeldBy cannot tell without flock: no directory is known to be held.
func HeldBy(string) (Holder, bool, error) { return Holder{}, false, nil }
