package export

// An export never leaves debris. Its output is built under a temporary
// name beside --out and renamed to it when complete; an error, a cancelled
// context (SIGINT, SIGTERM) or a refusal removes the temporary. kill -9
// cannot be caught, so the temporaries carry a name that says whose they
// are, .OUT.synthgen-export-DIGITS.tmp (the file, or the --hf directory),
// and the next export of the same --out removes those it can prove are
// dead: every export holds a shared flock on --out's directory while its
// temporaries exist, and a leftover is removed only under the exclusive
// lock, which no live export lets anyone take. The kernel drops a dead
// process's lock, so a killed export never blocks the next one. The spill
// file of Parquet shards (index.go) is unlinked as soon as it is created:
// it has no name a kill could leave behind.
//
// Without flock (not Unix, or a filesystem that refuses it on a
// directory), nothing is removed: a killed export's temporary stays, and
// the next export says so.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// tempTag is what every temporary name of an export holds after ".OUT".
const tempTag = ".synthgen-export-"

// tempDir makes the temporary directory an export to the directory out
// is built in, beside out (so the last rename stays on its filesystem)
// and named by tempPattern (so a killed export's is found and removed).
func tempDir(out string) (string, error) { return os.MkdirTemp(filepath.Dir(out), tempPattern(out)) }

// tempPattern is the os.CreateTemp pattern of out's temporaries.
func tempPattern(out string) string { return "." + filepath.Base(out) + tempTag + "*.tmp" }

// spillPattern is the pattern of the spill file beside out ("" for stdout).
func spillPattern(out string) string {
	if out == "" {
		return tempTag + "*.spill"
	}
	return "." + filepath.Base(out) + tempTag + "*.spill"
}

// ownTemp reports whether name, an entry of out's directory, is a
// temporary of an export of out: .BASE.synthgen-export-DIGITS.tmp or
// .spill, BASE being out's own (not a longer name that starts with it).
func ownTemp(out, name string) bool {
	rest, ok := strings.CutPrefix(name, "."+filepath.Base(out)+tempTag)
	if !ok {
		return false
	}
	digits, ok := strings.CutSuffix(rest, ".tmp")
	if !ok {
		digits, ok = strings.CutSuffix(rest, ".spill")
	}
	if !ok || digits == "" {
		return false
	}
	for _, c := range digits {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// claim is the lock an export holds on its output's directory while its
// temporaries exist (see the top of this file).
type claim struct {
	dir *os.File // nil when the directory cannot be locked
}

func (c *claim) release() {
	if c != nil && c.dir != nil {
		_ = c.dir.Close() // closing drops the flock
	}
}

// claimOut takes out's directory for an export: it removes the temporaries
// that earlier exports of out left when they were killed, then holds the
// shared lock. It returns what it removed and what it had to leave (another
// export runs in that directory, or the directory cannot be locked).
func claimOut(out string) (c *claim, removed, left []string, err error) {
	dir := filepath.Dir(out)
	leftovers := func() []string {
		entries, _ := os.ReadDir(dir)
		var names []string
		for _, e := range entries {
			if ownTemp(out, e.Name()) {
				names = append(names, filepath.Join(dir, e.Name()))
			}
		}
		return names
	}
	d, err := os.Open(dir)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("--out %s: %w", out, err)
	}
	c = &claim{dir: d}
	switch err := lockDir(d, true); {
	case err == nil:
		for _, p := range leftovers() {
			if err := os.RemoveAll(p); err != nil {
				c.release()
				return nil, removed, nil, fmt.Errorf("remove %s, left by an export that was killed: %w", p, err)
			}
			removed = append(removed, p)
		}
	case errors.Is(err, errLockBusy):
		left = leftovers() // another export runs here: its temporaries may be among them
	default:
		_ = d.Close()
		return &claim{}, nil, leftovers(), nil
	}
	if err := lockDir(d, false); err != nil {
		_ = d.Close()
		return &claim{}, removed, left, nil
	}
	return c, removed, left, nil
}

// errLockBusy is lockDir's answer when another process holds the lock.
var errLockBusy = errors.New("locked by another process")
