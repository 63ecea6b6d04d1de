//go:build !unix

package export

import (
	"errors"
	"os"
)

// lockDir: without flock no export can prove another one dead, so none
// removes a leftover (temp.go).
func lockDir(*os.File, bool) error { return errors.ErrUnsupported }
