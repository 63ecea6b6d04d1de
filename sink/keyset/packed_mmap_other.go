//go:build !unix

package keyset

import "errors"

// mapRegion fails where mmap is not available: regions are heap slices.
func mapRegion(int) ([]byte, error) { return nil, errors.ErrUnsupported }

func unmapRegion([]byte) error { return nil }
