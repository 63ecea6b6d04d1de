package safetensors

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
)

// FirstNonFinite scans a float tensor in fixed-size chunks (a hidden-state
// file can be a gigabyte; it is never held whole) and returns the index of
// its first NaN or infinite element, or -1 when every element is finite.
func (f *File) FirstNonFinite(name string) (int64, error) {
	sr, t, err := f.Section(name)
	if err != nil {
		return 0, err
	}
	size := t.DType.Size()
	bad := nonFinite(t.DType)
	if bad == nil {
		return 0, fmt.Errorf("safetensors: tensor %q is %s, not a float", name, t.DType)
	}
	buf := make([]byte, 1<<20-(1<<20)%size)
	var idx int64
	for {
		n, err := io.ReadFull(sr, buf)
		for i := 0; i+size <= n; i += size {
			if bad(buf[i : i+size]) {
				return idx, nil
			}
			idx++
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			return -1, nil
		}
		if err != nil {
			return 0, fmt.Errorf("safetensors: read %q: %w", name, err)
		}
	}
}

// nonFinite tests one little-endian element: an all-ones exponent is NaN
// or infinity in every IEEE-style format.
func nonFinite(d DType) func([]byte) bool {
	switch d {
	case BF16:
		return func(b []byte) bool { return binary.LittleEndian.Uint16(b)&0x7f80 == 0x7f80 }
	case F16:
		return func(b []byte) bool { return binary.LittleEndian.Uint16(b)&0x7c00 == 0x7c00 }
	case F32:
		return func(b []byte) bool {
			v := math.Float32frombits(binary.LittleEndian.Uint32(b))
			return math.IsNaN(float64(v)) || math.IsInf(float64(v), 0)
		}
	}
	return nil
}
