//go:build !unix

package hidden

import (
	"errors"
	"math"
	"os"
)

// errNoFlock: the extraction server marks a file being written with an
// flock, which this system cannot take; reading the file then could read
// it half-written, so the pass refuses instead.
var errNoFlock = errors.New("hidden states need flock, which this system lacks: run the pass on Linux or macOS")

func lockedByOther(*os.File) (bool, error) { return false, errNoFlock }

// Free is unknown here: the space check passes and a full disk is said
// when a write fails.
func Free(string) (int64, error) { return math.MaxInt64, nil }
