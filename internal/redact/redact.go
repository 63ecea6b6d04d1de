// Package redact masks what must not be printed or stored of a URL: its
// password (http://user:xxxxx@host), in the URL and in errors that name it.
package redact

import (
	"net/url"
	"strings"
)

// URL masks a password in a URL (http://user:xxxxx@host), so a
// base_url that carries credentials can be printed and stored.
func URL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		// An unparsable URL is printed as is only if it has no '@': it
		// might hold credentials in a shape url.Parse rejects.
		if strings.Contains(s, "@") {
			return "(unparsable URL)"
		}
		return s
	}
	return u.Redacted()
}

// URLs is urls, each with its password masked, comma-separated (the
// flag's form of endpoint.base_url).
func URLs(urls []string) string {
	shown := make([]string, len(urls))
	for i, u := range urls {
		shown[i] = URL(u)
	}
	return strings.Join(shown, ",")
}

// URLIn is err with every occurrence of rawURL shown as URL
// shows it (its password masked); errors.Is and errors.As still see err.
func URLIn(err error, rawURL string) error {
	if err == nil {
		return nil
	}
	return redacted{err: err, raw: rawURL, safe: URL(rawURL)}
}

// redacted shows err with raw replaced by safe (a URL with its password
// masked) and unwraps to err, so errors.Is still sees the cause.
type redacted struct {
	err       error
	raw, safe string
}

func (e redacted) Error() string { return strings.ReplaceAll(e.err.Error(), e.raw, e.safe) }
func (e redacted) Unwrap() error { return e.err }
