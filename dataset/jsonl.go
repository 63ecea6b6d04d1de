package dataset

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/synthgen/synthgen/dataset/internal/rawjson"
)

// maxLineBytes bounds one JSONL line. Rows of long conversations reach
// several MB; a longer line is a bad row (skipped or failed by policy), not
// a reason to hold an unbounded buffer. A variable so tests can lower it.
var maxLineBytes = 64 << 20

// lineReader yields the lines of a text stream, each at most maxLineBytes,
// without holding more than the current line. Blank lines (only white space)
// are not rows: they are passed over, though they count for line numbers.
type lineReader struct {
	br      *bufio.Reader
	line    int64 // 1-based number of the last line returned
	buf     []byte
	tooLong bool // the last line was over the limit and its bytes dropped
}

// next returns the next non-blank line, valid until the following call;
// io.EOF at the end.
func (lr *lineReader) next() ([]byte, error) {
	for {
		lr.buf = lr.buf[:0]
		lr.tooLong = false
		n := 0
		for {
			frag, err := lr.br.ReadSlice('\n')
			n += len(frag)
			if n > maxLineBytes {
				lr.tooLong = true
				lr.buf = lr.buf[:0]
			} else {
				lr.buf = append(lr.buf, frag...)
			}
			if err == bufio.ErrBufferFull {
				continue
			}
			if err == io.EOF {
				if n == 0 {
					return nil, io.EOF
				}
				break // a last line without a newline
			}
			if err != nil {
				return nil, err
			}
			break
		}
		lr.line++
		if lr.tooLong || !blank(lr.buf) {
			return lr.buf, nil
		}
	}
}

func blank(b []byte) bool {
	for _, c := range b {
		if c != ' ' && c != '\t' && c != '\r' && c != '\n' {
			return false
		}
	}
	return true
}

// jsonlSource reads JSON lines: one object per non-blank line.
type jsonlSource struct {
	path    string
	lines   lineReader
	fileRow int64
	closeFn func() error
	dec     bytes.Reader
}

var _ source = (*jsonlSource)(nil)

func newJSONL(path string, br *bufio.Reader, closeFn func() error) *jsonlSource {
	return &jsonlSource{path: path, lines: lineReader{br: br}, closeFn: closeFn}
}

func (s *jsonlSource) next(decode bool, skip func([]byte) bool) (row, position, *fieldError, error) {
	line, err := s.lines.next()
	if err != nil {
		if err == io.EOF {
			return nil, position{}, nil, io.EOF
		}
		return nil, position{}, nil, fmt.Errorf("read %s:%d: %w", s.path, s.lines.line+1, err)
	}
	pos := position{line: s.lines.line, fileRow: s.fileRow}
	s.fileRow++
	if !decode {
		return nil, pos, nil, nil
	}
	if s.lines.tooLong {
		return nil, pos, fieldErr("", fmt.Errorf("%w: over %d bytes", ErrLineTooLong, maxLineBytes)), nil
	}
	if skip != nil && skip(line) {
		return nil, pos, nil, errSkipped
	}
	r, bad := decodeObject(&s.dec, line)
	return r, pos, bad, nil
}

func (s *jsonlSource) close() error { return s.closeFn() }

// decodeObject decodes one JSON object with numbers kept as json.Number, so
// that ids keep every digit.
func decodeObject(rd *bytes.Reader, b []byte) (row, *fieldError) {
	if r, ok := rawjson.Flat(b); ok {
		return r, nil
	}
	return decodeObjectJSON(rd, b)
}

// decodeObjectJSON is decodeObject by encoding/json: every row that
// rawjson.Flat does not take, and the reference it is tested against.
func decodeObjectJSON(rd *bytes.Reader, b []byte) (row, *fieldError) {
	rd.Reset(b)
	dec := json.NewDecoder(rd)
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return nil, fieldErr("", fmt.Errorf("invalid JSON: %w", jsonCause(err)))
	}
	// What follows the object must be white space. Checked on the bytes
	// rather than with dec.Token, which grows the decoder's buffer to 1.5 KB
	// per row for a look at nothing (ARCHITECTURE.md, "Measured decisions").
	if !blank(b[int(dec.InputOffset()):]) {
		return nil, fieldErr("", errors.New("invalid JSON: data after the object"))
	}
	r, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr("", errors.New("not a JSON object"))
	}
	return r, nil
}

// jsonCause turns the decoder's io.EOF/ErrUnexpectedEOF on a cut object into
// words; other errors already say what is wrong.
func jsonCause(err error) error {
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return errors.New("unexpected end of line")
	}
	return err
}
