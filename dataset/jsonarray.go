package dataset

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
)

// jsonArraySource reads a file holding one JSON array of row objects,
// element by element with a streaming decoder, so the array is never in
// memory whole.
type jsonArraySource struct {
	path    string
	dec     *json.Decoder
	fileRow int64
	started bool
	done    bool
	closeFn func() error
}

var _ source = (*jsonArraySource)(nil)

func newJSONArray(path string, br *bufio.Reader, closeFn func() error) *jsonArraySource {
	dec := json.NewDecoder(br)
	dec.UseNumber()
	return &jsonArraySource{path: path, dec: dec, closeFn: closeFn}
}

// next never skips: an array element is found only by decoding it.
func (s *jsonArraySource) next(decode bool, _ func([]byte) bool) (row, position, *fieldError, error) {
	if s.done {
		return nil, position{}, nil, io.EOF
	}
	if !s.started {
		s.started = true
		if tok, err := s.dec.Token(); err != nil || tok != json.Delim('[') {
			return nil, position{}, nil, fmt.Errorf("read %s: not a JSON array", s.path)
		}
	}
	pos := position{fileRow: s.fileRow}
	if !s.dec.More() {
		// The closing bracket, then nothing but white space.
		if _, err := s.dec.Token(); err != nil {
			return nil, pos, nil, fmt.Errorf("read %s: after row %d: %w", s.path, s.fileRow-1, jsonCause(err))
		}
		if _, err := s.dec.Token(); err != io.EOF {
			return nil, pos, nil, fmt.Errorf("read %s: data after the JSON array", s.path)
		}
		s.done = true
		return nil, pos, nil, io.EOF
	}
	// A syntax error loses the place in the stream, so it ends the file;
	// an element that is valid JSON but not a row object is only a bad row.
	var v any
	if err := s.dec.Decode(&v); err != nil {
		var syn *json.SyntaxError
		if errors.As(err, &syn) || err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, pos, nil, fmt.Errorf("read %s:row %d: invalid JSON: %w", s.path, s.fileRow, jsonCause(err))
		}
		return nil, pos, nil, fmt.Errorf("read %s:row %d: %w", s.path, s.fileRow, err)
	}
	s.fileRow++
	if !decode {
		return nil, pos, nil, nil
	}
	r, ok := v.(map[string]any)
	if !ok {
		return nil, pos, fieldErr("", errors.New("not a JSON object")), nil
	}
	return r, pos, nil, nil
}

func (s *jsonArraySource) close() error { return s.closeFn() }
