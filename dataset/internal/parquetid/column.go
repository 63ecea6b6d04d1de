// Package parquetid reads the id column of a Parquet file alone, page by
// page, in step with the rows, so that a row whose keys are done is passed
// over without being read (dataset's Reader.SetSkip with dataset.id_field).
// Only a top-level column of strings or signed integers is read this way;
// any other id column, or any trouble reading it, leaves the rows to be
// decoded as before.
package parquetid

import (
	"encoding/json"
	"errors"
	"io"
	"strconv"
	"unicode/utf8"

	"github.com/parquet-go/parquet-go"
	"github.com/parquet-go/parquet-go/format"
)

// Column yields one value of a column per row, across row groups.
type Column struct {
	pf    *parquet.File
	col   int
	kind  parquet.Kind
	group int // next row group to open
	pages parquet.Pages
	page  parquet.Page
	vals  parquet.ValueReader
	buf   []parquet.Value
	n, i  int
	name  []byte // the field name as JSON
	raw   []byte
}

// New returns the reader of column field of pf, or nil when it is
// not a top-level, non-repeated column of strings or signed integers.
func New(pf *parquet.File, field string) *Column {
	leaf, ok := pf.Schema().Lookup(field)
	if !ok || len(leaf.Path) != 1 || leaf.Node.Repeated() || leaf.MaxRepetitionLevel > 0 {
		return nil
	}
	t := leaf.Node.Type()
	var lv format.LogicalTypeValue
	if lt := t.LogicalType(); lt != nil {
		lv = lt.Value
	}
	switch t.Kind() {
	case parquet.ByteArray:
		if _, isString := lv.(*format.StringType); lv != nil && !isString {
			return nil
		}
	case parquet.Int32, parquet.Int64:
		if it, isInt := lv.(*format.IntType); lv != nil && (!isInt || !it.IsSigned) {
			return nil
		}
	default:
		return nil
	}
	name, _ := json.Marshal(field)
	return &Column{pf: pf, col: leaf.ColumnIndex, kind: t.Kind(), buf: make([]parquet.Value, 256), name: name}
}

// Next returns the next row's id as a one-field JSON object, as the JSONL
// scan reads it ({"field": value}), or nil when it cannot say (a null, a
// string that is not UTF-8); err ends the column's use.
func (c *Column) Next() (raw []byte, err error) {
	for c.i == c.n {
		if err := c.fill(); err != nil {
			return nil, err
		}
	}
	v := c.buf[c.i]
	c.i++
	if v.IsNull() {
		return nil, nil
	}
	c.raw = append(append(append(c.raw[:0], '{'), c.name...), ':')
	switch c.kind {
	case parquet.ByteArray:
		b := v.ByteArray()
		if !utf8.Valid(b) {
			return nil, nil
		}
		s, _ := json.Marshal(string(b))
		c.raw = append(c.raw, s...)
	case parquet.Int32:
		c.raw = strconv.AppendInt(c.raw, int64(v.Int32()), 10)
	default:
		c.raw = strconv.AppendInt(c.raw, v.Int64(), 10)
	}
	return append(c.raw, '}'), nil
}

// fill reads the next values: from the page, the next page, or the next
// row group.
func (c *Column) fill() error {
	c.i, c.n = 0, 0
	if c.vals != nil {
		n, err := c.vals.ReadValues(c.buf)
		c.n = n
		if errors.Is(err, io.EOF) {
			parquet.Release(c.page)
			c.vals, c.page = nil, nil
			return nil
		}
		return err
	}
	if c.pages != nil {
		p, err := c.pages.ReadPage()
		if errors.Is(err, io.EOF) {
			c.pages.Close()
			c.pages = nil
			return nil
		}
		if err != nil {
			return err
		}
		c.page, c.vals = p, p.Values()
		return nil
	}
	groups := c.pf.RowGroups()
	if c.group >= len(groups) {
		return io.ErrUnexpectedEOF
	}
	c.pages = groups[c.group].ColumnChunks()[c.col].Pages()
	c.group++
	return nil
}

func (c *Column) Close() {
	if c.page != nil {
		parquet.Release(c.page)
	}
	if c.pages != nil {
		c.pages.Close()
	}
}
