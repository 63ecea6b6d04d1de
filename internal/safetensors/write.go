package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"sort"
)

// Data is one tensor to write: its raw little-endian bytes.
type Data struct {
	Name  string
	DType DType
	Shape []int64
	Bytes []byte
}

// Write writes tensors (in name order, data back to back) and metadata as a
// safetensors file. The header is padded with spaces to a multiple of 8
// bytes, as the reference writer does, so the data is aligned.
func Write(w io.Writer, tensors []Data, metadata map[string]string) error {
	ts := append([]Data(nil), tensors...)
	sort.Slice(ts, func(i, j int) bool { return ts[i].Name < ts[j].Name })
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	var at int64
	for _, t := range ts {
		if t.Name == "__metadata__" {
			return fmt.Errorf("safetensors: write: a tensor cannot be named __metadata__")
		}
		tt := Tensor{Name: t.Name, DType: t.DType, Shape: t.Shape, Begin: at, End: at + int64(len(t.Bytes))}
		if t.DType.Size() == 0 {
			return fmt.Errorf("safetensors: write %q: dtype %q not supported", t.Name, t.DType)
		}
		if err := checkShape(tt); err != nil {
			return fmt.Errorf("write: %w", err)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		hdr[t.Name] = entry{DType: t.DType, Shape: shape, DataOffsets: []int64{tt.Begin, tt.End}}
		at = tt.End
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return fmt.Errorf("safetensors: write header: %w", err)
	}
	if pad := (8 - len(js)%8) % 8; pad > 0 {
		js = append(js, bytes.Repeat([]byte{' '}, pad)...)
	}
	var lenBuf [8]byte
	binary.LittleEndian.PutUint64(lenBuf[:], uint64(len(js)))
	if _, err := w.Write(lenBuf[:]); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	if _, err := w.Write(js); err != nil {
		return fmt.Errorf("safetensors: write: %w", err)
	}
	for _, t := range ts {
		if _, err := w.Write(t.Bytes); err != nil {
			return fmt.Errorf("safetensors: write %q: %w", t.Name, err)
		}
	}
	return nil
}

// Int64Bytes is vals as an I64 tensor's little-endian bytes.
func Int64Bytes(vals []int64) []byte {
	b := make([]byte, 8*len(vals))
	for i, v := range vals {
		binary.LittleEndian.PutUint64(b[8*i:], uint64(v))
	}
	return b
}
