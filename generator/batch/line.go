package batch

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"

	"github.com/synthgen/synthgen/sink"
)

// lineURL is the endpoint every line asks.
const lineURL = "/v1/chat/completions"

// maxLine bounds one line of a batch file read back (an input line is at
// most what the pool sends; an output line adds the answer).
const maxLine = 64 << 20

// inputLine is one request of a batch input file.
type inputLine struct {
	CustomID string          `json:"custom_id"`
	Method   string          `json:"method"`
	URL      string          `json:"url"`
	Body     json.RawMessage `json:"body"`
}

// outputLine is one line of a batch's output or error file.
type outputLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// customID names the request of key k whose messages number turns: a
// conversation's turns are distinct requests of one key.
func customID(k sink.Key, turns int) string {
	return strconv.Itoa(k.Sample) + "." + strconv.Itoa(turns) + "." + k.ID
}

// answer is what a line brings its request: the body of a 200, or why not.
type answer struct {
	body   []byte
	status int    // the line's status code; 0: none
	fail   string // "" with a body
}

// eachLine calls each with every non-empty line of r, numbered from 1;
// an error names the file and line.
func eachLine(r io.Reader, name string, each func(b []byte) error) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		b, err := readLine(br)
		if err == io.EOF {
			return nil
		}
		if err == nil && len(b) > 0 {
			err = each(b)
		}
		if err != nil {
			return fmt.Errorf("%s:%d: %w", name, n, err)
		}
	}
}

// readLines calls each with every line of a batch's output or error file;
// a line that is not a batch line is an error naming its file and line.
func readLines(r io.Reader, name string, each func(cid string, a answer)) error {
	return eachLine(r, name, func(b []byte) error {
		var l outputLine
		if err := json.Unmarshal(b, &l); err != nil {
			return fmt.Errorf("not a batch output line: %w", err)
		}
		if l.CustomID == "" {
			return errors.New("custom_id: missing")
		}
		each(l.CustomID, l.answer())
		return nil
	})
}

func (l *outputLine) answer() answer {
	var a answer
	if l.Response != nil {
		a.status = l.Response.StatusCode
		if a.status == 200 && l.Error == nil {
			a.body = l.Response.Body
			return a
		}
	}
	switch {
	case l.Error != nil:
		a.fail = l.Error.Code + ": " + l.Error.Message
	case l.Response != nil:
		a.fail = fmt.Sprintf("status %d: %s", a.status, truncate(l.Response.Body, 300))
	default:
		a.fail = "a line with neither response nor error"
	}
	return a
}

func truncate(b []byte, n int) string {
	if len(b) > n {
		b = b[:n]
	}
	return string(b)
}

// readLine is one line without its newline, bounded by maxLine.
func readLine(br *bufio.Reader) ([]byte, error) {
	var line []byte
	for {
		frag, err := br.ReadSlice('\n')
		line = append(line, frag...)
		if len(line) > maxLine {
			return nil, fmt.Errorf("a line longer than %d bytes", maxLine)
		}
		switch err {
		case nil:
			return line[:len(line)-1], nil
		case bufio.ErrBufferFull:
			continue
		case io.EOF:
			if len(line) == 0 {
				return nil, io.EOF
			}
			return line, nil
		default:
			return nil, err
		}
	}
}

// inputIDs calls each with the custom_id of every line of a batch input file.
func inputIDs(r io.Reader, name string, each func(cid string)) error {
	return eachLine(r, name, func(b []byte) error {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(b, &l); err != nil || l.CustomID == "" {
			return errors.New("not a batch input line with a custom_id")
		}
		each(l.CustomID)
		return nil
	})
}
