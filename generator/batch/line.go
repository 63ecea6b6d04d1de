package batch

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
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
	body    []byte
	status  int    // the line's status code; 0: none
	errBody []byte // the body of a status other than 200, for its error's cause
	fail    string // "" with a body
	where   string // the file and line it came from; "": none
	batch   int    // the number of the batch it came from; 0: none (a failure of its own)
}

// errBadLine marks a line that is not what its file should hold: it costs
// that line only, and reading goes on with the next.
var errBadLine = errors.New("malformed line")

// eachLine calls each with every non-empty line of r, numbered from 1. A
// line each refuses with errBadLine, or one over maxLine, is given to bad
// (its error names the file and line) and reading goes on; any other error
// ends the read, naming the file and line.
func eachLine(r io.Reader, name string, each func(b []byte, n int) error, bad func(error)) error {
	br := bufio.NewReaderSize(r, 1<<16)
	for n := 1; ; n++ {
		b, err := readLine(br)
		if err == io.EOF {
			return nil
		}
		if err == nil && len(b) > 0 {
			err = each(b, n)
		}
		if err == nil {
			continue
		}
		err = fmt.Errorf("%s:%d: %w", name, n, err)
		if !errors.Is(err, errBadLine) || bad == nil {
			return err
		}
		bad(err)
	}
}

// cidPattern finds the custom_id in a line that is not JSON, so that the
// line's request is told which line failed it.
var cidPattern = regexp.MustCompile(`"custom_id"\s*:\s*"([^"\\]+)"`)

// readLines calls each with every line of a batch's output or error file.
// A line that is not a batch line costs that line only: it goes to bad
// with its file and line named, and to its request when its custom_id can
// be read, and the lines after it are read.
func readLines(r io.Reader, name string, each func(cid string, a answer), bad func(err error)) error {
	return eachLine(r, name, func(b []byte, n int) error {
		where := name + ":" + strconv.Itoa(n)
		var l outputLine
		err := json.Unmarshal(b, &l)
		if err == nil && l.CustomID == "" {
			err = errors.New("custom_id: missing")
		}
		if err != nil {
			err = fmt.Errorf("%w: not a batch output line: %w", errBadLine, err)
			cid := l.CustomID
			if m := cidPattern.FindSubmatch(b); cid == "" && m != nil {
				cid = string(m[1])
			}
			if cid != "" {
				each(cid, answer{fail: where + ": " + err.Error(), where: where})
			}
			return err
		}
		a := l.answer()
		a.where = where
		each(l.CustomID, a)
		return nil
	}, bad)
}

func (l *outputLine) answer() answer {
	var a answer
	if l.Response != nil {
		a.status = l.Response.StatusCode
		body := l.Response.Body
		if a.status == 200 && l.Error == nil && len(body) > 0 && string(body) != "null" {
			a.body = body
			return a
		}
		if a.status != 200 {
			a.errBody = body
		}
	}
	switch {
	case l.Error != nil:
		a.fail = l.Error.Code + ": " + l.Error.Message
	case l.Response != nil && a.status == 200:
		a.fail = "status 200 without a body"
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
			return nil, skipLine(br)
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

// skipLine reads past the rest of a line over maxLine, so that the lines
// after it are read: the line is a bad line, or the read's error.
func skipLine(br *bufio.Reader) error {
	for {
		_, err := br.ReadSlice('\n')
		switch err {
		case nil, io.EOF:
			return fmt.Errorf("%w: longer than %d bytes", errBadLine, maxLine)
		case bufio.ErrBufferFull:
			continue
		default:
			return err
		}
	}
}

// inputIDs calls each with the custom_id of every line of a batch input file.
func inputIDs(r io.Reader, name string, each func(cid string)) error {
	return eachLine(r, name, func(b []byte, _ int) error {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(b, &l); err != nil || l.CustomID == "" {
			return errors.New("not a batch input line with a custom_id")
		}
		each(l.CustomID)
		return nil
	}, nil)
}

// inputLines reads a batch input file's lines by custom_id, each whole
// with its newline, as they go into a new batch again.
func inputLines(path string) (map[string][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	out := map[string][]byte{}
	err = eachLine(f, path, func(b []byte, _ int) error {
		var l struct {
			CustomID string `json:"custom_id"`
		}
		if err := json.Unmarshal(b, &l); err != nil || l.CustomID == "" {
			return errors.New("not a batch input line with a custom_id")
		}
		out[l.CustomID] = append(slices.Clip(b), '\n')
		return nil
	}, nil)
	return out, err
}
