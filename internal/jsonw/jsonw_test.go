package jsonw

import (
	"bytes"
	"encoding/json"
	"strings"
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

// BenchmarkAppendString: an answer's worth of English text with a few
// escapes, the common case of a record's content and a request's prompt.
func BenchmarkAppendString(b *testing.B) {
	s := "The sum of the first n odd numbers is n squared: 1 + 3 + 5 = 9, and in general " +
		"the k-th odd number is 2k - 1, so the sum telescopes. \"Proof\" by induction:\n" +
		"assume it holds for n; adding 2(n+1) - 1 gives n^2 + 2n + 1 = (n+1)^2. Therefore the " +
		"answer for 12 odd numbers is 144, and for 100 odd numbers it is 10,000.\n"
	buf := make([]byte, 0, 1024)
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}

// TestAppendStringEveryLane puts each byte that needs a look at every
// position of strings around the 8-byte steps, so that no lane of the
// fast path lets one through.
func TestAppendStringEveryLane(t *testing.T) {
	specials := []string{"\x00", "\x1f", "\"", "\\", "\x7f", "é", "\xff", "\u2028", " ", "!", "#", "[", "]"}
	for n := 1; n <= 18; n++ {
		for p := 0; p < n; p++ {
			for _, c := range specials {
				s := strings.Repeat("a", p) + c + strings.Repeat("b", n-p-1)
				if got, want := AppendString(nil, s), reference(t, s); !bytes.Equal(got, want) {
					t.Fatalf("%q: got %s, want %s", s, got, want)
				}
			}
		}
	}
}
