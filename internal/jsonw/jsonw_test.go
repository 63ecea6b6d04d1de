package jsonw

import (
	"bytes"
	"encoding/json"
	"testing"
)

// reference is encoding/json's encoding of s with HTML escaping off.
func reference(t testing.TB, s string) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(s); err != nil {
		t.Fatal(err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

var cases = []string{
	"", "plain", `quote " and \ backslash`, "\b\f\n\r\t", "\x00\x01\x1f\x7f",
	"<html> & more", "héllo, 世界, 🙂", "\u2028 and \u2029", "bad \xff utf-8 \xc3", "\xed\xa0\x80",
}

func TestAppendStringMatchesEncodingJSON(t *testing.T) {
	for _, s := range cases {
		if got, want := AppendString(nil, s), reference(t, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	}
	// It appends: what the buffer held stays.
	if got := AppendString([]byte("x:"), "y"); string(got) != `x:"y"` {
		t.Errorf("appended to x: got %s", got)
	}
}

func FuzzAppendString(f *testing.F) {
	for _, s := range cases {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := AppendString(nil, s), reference(t, s); !bytes.Equal(got, want) {
			t.Errorf("%q: got %s, want %s", s, got, want)
		}
	})
}
