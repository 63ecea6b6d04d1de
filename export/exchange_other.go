//go:build !linux

package export

import "errors"

// exchange: no system call swaps two names here (putInPlace renames twice).
func exchange(a, b string) error { return errors.ErrUnsupported }
