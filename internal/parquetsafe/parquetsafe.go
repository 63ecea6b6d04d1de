// Package parquetsafe is the one guard around parquet-go's readers:
// parquet-go panics on some malformed files (bad pages, a footer whose
// offsets lie), and a corrupt file must be an error naming it, not a crash
// of a resume or of an eight-hour job. The sink's parts and dataset's input
// rows are both read through it; neither package imports the other, so the
// guard lives here.
package parquetsafe

import (
	"fmt"
	"io"

	"github.com/parquet-go/parquet-go"
)

// Catch, deferred by a function that reads a Parquet file with
// parquet-go, makes a panic of the library that function's error:
// "WHERE: unreadable parquet file: PANIC", WHERE from where() naming the
// file (and the row), or without it when where is nil or says "". where
// is called only after a panic, so that a reader of many rows builds no
// message for each.
//
//	defer parquetsafe.Catch(&err, func() string { return path })
func Catch(err *error, where func() string) {
	p := recover()
	if p == nil {
		return
	}
	w := ""
	if where != nil {
		w = where()
	}
	if w == "" {
		*err = fmt.Errorf("unreadable parquet file: %v", p)
		return
	}
	*err = fmt.Errorf("%s: unreadable parquet file: %v", w, p)
}

// Open reads the footer of the Parquet file r of size bytes. A footer that
// does not parse is "not a readable parquet file: ...", one that makes
// parquet-go panic Catch's error; the caller names the file.
func Open(r io.ReaderAt, size int64, opts ...parquet.FileOption) (pf *parquet.File, err error) {
	defer Catch(&err, nil)
	pf, err = parquet.OpenFile(r, size, opts...)
	if err != nil {
		return nil, fmt.Errorf("not a readable parquet file: %w", err)
	}
	return pf, nil
}
