package main

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
)

// appendPrompt writes prompt i's text: short, distinct per row, and with no
// byte that JSON escapes, so that the yardstick can splice it into a body.
func appendPrompt(b []byte, i int64) []byte {
	b = append(b, "Question "...)
	b = strconv.AppendInt(b, i, 10)
	b = append(b, ": what is the sum of the first "...)
	b = strconv.AppendInt(b, i%997+3, 10)
	b = append(b, " odd numbers?"...)
	return b
}

// appendID writes row i's string id for the id_field datasets: 24 bytes, as
// a content hash or a UUID-ish key would be, not a number in disguise.
func appendID(b []byte, i int64) []byte {
	h := uint64(i)*0x9E3779B97F4A7C15 ^ 0x5bd1e995
	b = append(b, "row-"...)
	b = append(b, fmt.Sprintf("%08d-%011x", i, h>>20)...)
	return b
}

// writeDataset writes rows 0..n-1 as JSONL with a "prompt" column and, when
// ids is set, an "id" column, and returns the file's path.
func writeDataset(path string, n int64, ids bool) error {
	f, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("dataset %s: %w", path, err)
	}
	w := bufio.NewWriterSize(f, 1<<20)
	line := make([]byte, 0, 256)
	for i := range n {
		line = append(line[:0], '{')
		if ids {
			line = append(line, `"id":"`...)
			line = appendID(line, i)
			line = append(line, `",`...)
		}
		line = append(line, `"prompt":"`...)
		line = appendPrompt(line, i)
		line = append(line, "\"}\n"...)
		if _, err := w.Write(line); err != nil {
			f.Close()
			return fmt.Errorf("dataset %s: %w", path, err)
		}
	}
	if err := w.Flush(); err != nil {
		f.Close()
		return fmt.Errorf("dataset %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("dataset %s: %w", path, err)
	}
	return nil
}
