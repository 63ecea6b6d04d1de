package redact

import (
	"errors"
	"strings"
	"testing"
)

// A password is masked wherever a URL is shown; a URL without one, or one
// url.Parse rejects without an '@', is shown as it is.
func TestURL(t *testing.T) {
	for in, want := range map[string]string{
		"http://u:hunter2@h:8000/v1": "http://u:xxxxx@h:8000/v1",
		"http://h:8000/v1":           "http://h:8000/v1",
		"http://u:p@h:bad port/v1":   "(unparsable URL)",
	} {
		if got := URL(in); got != want {
			t.Errorf("URL(%q) = %q, want %q", in, got, want)
		}
	}
	if got := URLs([]string{"http://a/v1", "http://u:p@b/v1"}); got != "http://a/v1,http://u:xxxxx@b/v1" {
		t.Errorf("URLs = %q", got)
	}
	cause := errors.New("boom")
	err := URLIn(errors.Join(errors.New("get http://u:hunter2@h/v1/models"), cause), "http://u:hunter2@h/v1")
	if strings.Contains(err.Error(), "hunter2") || !errors.Is(err, cause) {
		t.Errorf("URLIn: %q (still wraps the cause: %v)", err, errors.Is(err, cause))
	}
}
