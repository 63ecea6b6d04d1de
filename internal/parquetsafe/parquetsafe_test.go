package parquetsafe

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/parquet-go/parquet-go"
)

func TestCatchMakesAPanicTheError(t *testing.T) {
	t.Parallel()
	read := func(where func() string) (err error) {
		defer Catch(&err, where)
		panic("index out of range [7] with length 3")
	}
	err := read(func() string { return "data/a.parquet:row 12" })
	if err == nil || err.Error() != "data/a.parquet:row 12: unreadable parquet file: index out of range [7] with length 3" {
		t.Errorf("err = %v", err)
	}
	if err := read(nil); err == nil || err.Error() != "unreadable parquet file: index out of range [7] with length 3" {
		t.Errorf("without where: err = %v", err)
	}
}

func TestCatchKeepsAnErrorWithoutPanic(t *testing.T) {
	t.Parallel()
	want := errors.New("no id column")
	read := func() (err error) {
		defer Catch(&err, func() string { t.Error("where called without a panic"); return "" })
		return want
	}
	if err := read(); err != want {
		t.Errorf("err = %v, want %v", err, want)
	}
}

func TestOpen(t *testing.T) {
	t.Parallel()
	junk := []byte("PAR1 this is not a footer PAR1")
	if _, err := Open(bytes.NewReader(junk), int64(len(junk))); err == nil || !strings.HasPrefix(err.Error(), "not a readable parquet file: ") {
		t.Errorf("junk: err = %v", err)
	}
	var buf bytes.Buffer
	type row struct {
		ID string `parquet:"id"`
	}
	w := parquet.NewGenericWriter[row](&buf)
	if _, err := w.Write([]row{{"a"}, {"b"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	pf, err := Open(bytes.NewReader(buf.Bytes()), int64(buf.Len()))
	if err != nil || pf.NumRows() != 2 {
		t.Fatalf("a file of 2 rows: %v, err %v", pf, err)
	}
}
