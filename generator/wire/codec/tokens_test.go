package codec

import "testing"

func TestParseTokenID(t *testing.T) {
	for s, want := range map[string]int32{"token_id:0": 0, "token_id:151643": 151643, "token_id:2147483647": 2147483647} {
		if got, ok := ParseTokenID(s); !ok || got != want {
			t.Errorf("ParseTokenID(%q) = %d, %v; want %d", s, got, ok, want)
		}
	}
	for _, s := range []string{"", "token_id:", "token_id:-1", "token_id:01", "token_id:2147483648", "token_id:99999999999", "token_id:1a", "Token_id:1", " token_id:1", "the"} {
		if _, ok := ParseTokenID(s); ok {
			t.Errorf("ParseTokenID(%q) took it for an id", s)
		}
	}
}
