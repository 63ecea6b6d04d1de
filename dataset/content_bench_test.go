package dataset

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// BenchmarkStamp measures the content stamp every run takes of a local
// dataset beside its floor, reading the same file into io.Discard, and the
// line count Count does when Stamp has not counted the file already
// (count: rowcount.go's memory cleared each time; stamp counts JSONL rows
// as it hashes). The stamp's cost over the read is the price of refusing an
// edited dataset; MB/s is reported for each.
func BenchmarkStamp(b *testing.B) {
	path := filepath.Join(b.TempDir(), "rows.jsonl")
	var buf bytes.Buffer
	for i := 0; buf.Len() < 64<<20; i++ {
		fmt.Fprintf(&buf, `{"conversations":[{"from":"human","value":"question %d: explain the proof in detail"},{"from":"gpt","value":"an answer of moderate length, %d"}],"source":"bench"}`+"\n", i, i)
	}
	if err := os.WriteFile(path, buf.Bytes(), 0o644); err != nil {
		b.Fatal(err)
	}
	size := int64(buf.Len())
	opts := Options{Selection: Selection{Path: path}}
	b.Run("read", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			f, err := os.Open(path)
			if err != nil {
				b.Fatal(err)
			}
			if _, err := io.CopyBuffer(io.Discard, f, make([]byte, readBufSize)); err != nil {
				b.Fatal(err)
			}
			f.Close()
		}
	})
	b.Run("stamp", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			if _, err := Stamp(opts); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("count", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			rowCounts.Lock()
			clear(rowCounts.m)
			rowCounts.Unlock()
			if _, err := Count(opts); err != nil {
				b.Fatal(err)
			}
		}
	})
}
