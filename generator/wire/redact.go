package wire

import (
	"encoding/json"
	"net/http"
	"strings"
)

// apiKey is the key the client sends. A server or a proxy may repeat the
// Authorization header in an error body, an error event or a header; the
// client knows the key, so it takes it out of everything the server says
// before anything prints or writes it.
type apiKey string

// redactedKey replaces the key wherever it appeared.
const redactedKey = "[redacted]"

// text replaces the key in s, as written and as a JSON string escapes it.
func (k apiKey) text(s string) string {
	if k == "" {
		return s
	}
	s = strings.ReplaceAll(s, string(k), redactedKey)
	if q, err := json.Marshal(string(k)); err == nil && string(q[1:len(q)-1]) != string(k) {
		s = strings.ReplaceAll(s, string(q[1:len(q)-1]), redactedKey)
	}
	return s
}

// redact returns err with the key out of its message and its text; an
// *Error stays an *Error (the engine classifies it) and every error still
// unwraps to what it wrapped.
func (k apiKey) redact(err error) error {
	if k == "" || err == nil {
		return err
	}
	if e, ok := err.(*Error); ok {
		c := *e
		c.Message = k.text(c.Message)
		if c.Err != nil {
			c.Err = keyRedacted{err: c.Err, key: k}
		}
		return &c
	}
	return keyRedacted{err: err, key: k}
}

// redactHeader replaces the key in every header value.
func (k apiKey) redactHeader(h http.Header) {
	if k == "" {
		return
	}
	for name, vs := range h {
		for i, v := range vs {
			if strings.Contains(v, string(k)) {
				h[name][i] = k.text(v)
			}
		}
	}
}

// keyRedacted shows err without the key and unwraps to it.
type keyRedacted struct {
	err error
	key apiKey
}

func (e keyRedacted) Error() string { return e.key.text(e.err.Error()) }
func (e keyRedacted) Unwrap() error { return e.err }
