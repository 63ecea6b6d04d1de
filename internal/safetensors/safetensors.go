// Package safetensors reads and writes the safetensors tensor format
// (an 8-byte little-endian header length, a JSON header naming each
// tensor's dtype, shape and byte range, then the raw data). A hidden-state
// server writes these files, so the reader treats them as untrusted: every
// size, shape and offset is checked against the file before a byte of data
// is believed.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
)

// MaxHeader bounds the JSON header: the reference implementation refuses
// headers over 100 MB, and a length read from a damaged file must not make
// us allocate gigabytes.
const MaxHeader = 100 << 20

// DType is a tensor's element type as the header spells it.
type DType string

// The dtypes this package reads and writes; a header naming another is an
// error, since a hidden-state file in it could not be checked for NaN.
const (
	BF16 DType = "BF16"
	F16  DType = "F16"
	F32  DType = "F32"
	I64  DType = "I64"
)

// Size is the bytes one element takes, 0 for a dtype this package does not know.
func (d DType) Size() int {
	switch d {
	case BF16, F16:
		return 2
	case F32:
		return 4
	case I64:
		return 8
	}
	return 0
}

// Tensor is one entry of the header: where its data lies, relative to the
// start of the data section.
type Tensor struct {
	Name       string
	DType      DType
	Shape      []int64
	Begin, End int64
}

// Elems is the number of elements the shape holds.
func (t Tensor) Elems() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is a parsed header: the tensors by name, the metadata, and where
// the data section starts in the file.
type File struct {
	Tensors  map[string]Tensor
	Metadata map[string]string
	// DataStart is the file offset of the data section (8 + header length).
	DataStart int64
	r         io.ReaderAt
}

type entry struct {
	DType       DType   `json:"dtype"`
	Shape       []int64 `json:"shape"`
	DataOffsets []int64 `json:"data_offsets"`
}

// Open parses the header of a safetensors file of size bytes read through
// r, and checks that every tensor's byte range matches its dtype and shape,
// lies inside the file, and that the ranges cover the data section with no
// overlap and no hole (as the format requires).
func Open(r io.ReaderAt, size int64) (*File, error) {
	var lenBuf [8]byte
	if size < 8 {
		return nil, fmt.Errorf("safetensors: file of %d bytes has no header length", size)
	}
	if _, err := r.ReadAt(lenBuf[:], 0); err != nil {
		return nil, fmt.Errorf("safetensors: read header length: %w", err)
	}
	n := binary.LittleEndian.Uint64(lenBuf[:])
	if n > MaxHeader {
		return nil, fmt.Errorf("safetensors: header of %d bytes is over the %d limit", n, MaxHeader)
	}
	if int64(n) > size-8 {
		return nil, fmt.Errorf("safetensors: header of %d bytes is past the end of a %d-byte file", n, size)
	}
	hdr := make([]byte, n)
	if _, err := r.ReadAt(hdr, 8); err != nil {
		return nil, fmt.Errorf("safetensors: read header: %w", err)
	}
	f := &File{Tensors: map[string]Tensor{}, DataStart: 8 + int64(n), r: r}
	if err := f.parseHeader(hdr); err != nil {
		return nil, err
	}
	if err := f.checkLayout(size - f.DataStart); err != nil {
		return nil, err
	}
	return f, nil
}

func (f *File) parseHeader(hdr []byte) error {
	if len(bytes.TrimSpace(hdr)) == 0 || bytes.TrimSpace(hdr)[0] != '{' {
		return errors.New("safetensors: header is not a JSON object")
	}
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(hdr, &raw); err != nil {
		return fmt.Errorf("safetensors: header: %w", err)
	}
	for name, msg := range raw {
		if name == "__metadata__" {
			if err := json.Unmarshal(msg, &f.Metadata); err != nil {
				return fmt.Errorf("safetensors: header: __metadata__: %w", err)
			}
			continue
		}
		var e entry
		dec := json.NewDecoder(bytes.NewReader(msg))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&e); err != nil {
			return fmt.Errorf("safetensors: header: tensor %q: %w", name, err)
		}
		if e.DType.Size() == 0 {
			return fmt.Errorf("safetensors: tensor %q: dtype %q not supported", name, e.DType)
		}
		if len(e.DataOffsets) != 2 {
			return fmt.Errorf("safetensors: tensor %q: data_offsets has %d numbers, want 2", name, len(e.DataOffsets))
		}
		t := Tensor{Name: name, DType: e.DType, Shape: e.Shape, Begin: e.DataOffsets[0], End: e.DataOffsets[1]}
		if err := checkShape(t); err != nil {
			return err
		}
		f.Tensors[name] = t
	}
	return nil
}

// checkShape refuses negative dimensions and a byte size that overflows
// or differs from the tensor's offsets.
func checkShape(t Tensor) error {
	bytesN := int64(t.DType.Size())
	for _, d := range t.Shape {
		if d < 0 {
			return fmt.Errorf("safetensors: tensor %q: negative dimension in shape %v", t.Name, t.Shape)
		}
		if d != 0 && bytesN > math.MaxInt64/d {
			return fmt.Errorf("safetensors: tensor %q: shape %v overflows", t.Name, t.Shape)
		}
		bytesN *= d
	}
	if t.Begin < 0 || t.End < t.Begin {
		return fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] out of order", t.Name, t.Begin, t.End)
	}
	if t.End-t.Begin != bytesN {
		return fmt.Errorf("safetensors: tensor %q: %d bytes in data_offsets, shape %v of %s needs %d", t.Name, t.End-t.Begin, t.Shape, t.DType, bytesN)
	}
	return nil
}

// checkLayout makes the byte ranges tile the data section exactly.
func (f *File) checkLayout(dataLen int64) error {
	ts := make([]Tensor, 0, len(f.Tensors))
	for _, t := range f.Tensors {
		ts = append(ts, t)
	}
	sort.Slice(ts, func(i, j int) bool {
		if ts[i].Begin != ts[j].Begin {
			return ts[i].Begin < ts[j].Begin
		}
		return ts[i].End < ts[j].End
	})
	var at int64
	for _, t := range ts {
		if t.Begin < at {
			return fmt.Errorf("safetensors: tensor %q: data_offsets [%d, %d] overlap another tensor", t.Name, t.Begin, t.End)
		}
		if t.Begin > at {
			return fmt.Errorf("safetensors: tensor %q: hole of %d bytes before it", t.Name, t.Begin-at)
		}
		at = t.End
	}
	if at != dataLen {
		return fmt.Errorf("safetensors: tensors cover %d bytes of a %d-byte data section", at, dataLen)
	}
	return nil
}

// Section reads tensor name's raw bytes.
func (f *File) Section(name string) (*io.SectionReader, Tensor, error) {
	t, ok := f.Tensors[name]
	if !ok {
		return nil, Tensor{}, fmt.Errorf("safetensors: no tensor %q", name)
	}
	return io.NewSectionReader(f.r, f.DataStart+t.Begin, t.End-t.Begin), t, nil
}

// Int64s reads an I64 tensor's values; max bounds how many it may hold, so
// a damaged shape cannot make it allocate more than the caller expects.
func (f *File) Int64s(name string, max int64) ([]int64, error) {
	sr, t, err := f.Section(name)
	if err != nil {
		return nil, err
	}
	if t.DType != I64 {
		return nil, fmt.Errorf("safetensors: tensor %q is %s, want %s", name, t.DType, I64)
	}
	if t.Elems() > max {
		return nil, fmt.Errorf("safetensors: tensor %q holds %d values, more than %d", name, t.Elems(), max)
	}
	buf := make([]byte, t.End-t.Begin)
	if _, err := io.ReadFull(sr, buf); err != nil {
		return nil, fmt.Errorf("safetensors: read %q: %w", name, err)
	}
	out := make([]int64, t.Elems())
	for i := range out {
		out[i] = int64(binary.LittleEndian.Uint64(buf[8*i:]))
	}
	return out, nil
}
