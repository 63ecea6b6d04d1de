//go:build !unix

package hiddenstates

import (
	"errors"
	"os"
)

// lockExclusive: no flock here, so the mock cannot imitate the
// connector's lock; it refuses rather than write files a reader could
// take half-written.
func lockExclusive(*os.File) error {
	return errors.New("the hidden-states mock needs flock (Linux, macOS)")
}
