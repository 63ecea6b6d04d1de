package dataset

import (
	"encoding/json"
	"fmt"
	"io"
)

// Count returns how many prompts Next would yield if no row were bad: the
// physical rows below Limit that belong to the shard (split by file: of the
// shard's files only, each below Limit). It is cheap enough for a progress
// total: Parquet footers hold row counts; JSONL is a line count (of the
// decompressed stream), taken from Stamp's when it just counted or trusted
// the file; only JSON arrays need a full scan. It stops reading once Limit
// is reached.
func Count(opts Options) (int64, error) {
	o, err := opts.normalize()
	if err != nil {
		return 0, err
	}
	if o.reading() {
		rows := o.Output.Records()
		if o.Limit > 0 {
			rows = min(rows, o.Limit)
		}
		return o.Selection.Total(rows), nil
	}
	files, fetch, err := o.selectFiles()
	if err != nil {
		return 0, err
	}
	var rows int64
	for _, file := range files {
		path := file.path
		if o.Limit > 0 && rows >= o.Limit && !o.ByFile() {
			break
		}
		max := int64(-1)
		switch {
		case o.ByFile() && o.Limit > 0:
			max = o.Limit // each file's first Limit rows
		case o.Limit > 0:
			max = o.Limit - rows
		}
		if fetch != nil {
			if err := fetch(path); err != nil {
				return 0, err
			}
		}
		n, err := countFile(path, max)
		if err != nil {
			return 0, err
		}
		rows += n
	}
	return o.Selection.Total(rows), nil
}

// countFile counts a file's physical rows, stopping past max when max >= 0.
func countFile(path string, max int64) (int64, error) {
	kind, comp, err := fileType(path)
	if err != nil {
		return 0, err
	}
	if n, ok := rememberedRows(path); ok {
		// Stamp counted it a moment ago, or trusted a resume's count
		// (rowcount.go).
		if max >= 0 {
			n = min(n, max)
		}
		return n, nil
	}
	if kind == kindParquet {
		f, pf, err := openParquetFile(path)
		if err != nil {
			return 0, err
		}
		defer f.Close()
		return pf.NumRows(), nil
	}
	br, closeFn, err := openText(path, comp)
	if err != nil {
		return 0, err
	}
	defer closeFn()
	isArray := false
	if kind == kindJSON {
		isArray, err = startsArray(br)
	} else {
		err = skipBOM(br)
	}
	if err != nil {
		return 0, fmt.Errorf("read %s: %w", path, err)
	}
	var n int64
	if isArray {
		dec := json.NewDecoder(br)
		if tok, err := dec.Token(); err != nil || tok != json.Delim('[') {
			return 0, fmt.Errorf("read %s: not a JSON array", path)
		}
		for dec.More() && (max < 0 || n < max) {
			var skip json.RawMessage
			if err := dec.Decode(&skip); err != nil {
				return 0, fmt.Errorf("read %s:row %d: invalid JSON: %w", path, n, jsonCause(err))
			}
			n++
		}
		return n, nil
	}
	lr := lineReader{br: br}
	for max < 0 || n < max {
		if _, err := lr.next(); err != nil {
			if err == io.EOF {
				break
			}
			return 0, fmt.Errorf("read %s:%d: %w", path, lr.line+1, err)
		}
		n++
	}
	return n, nil
}
