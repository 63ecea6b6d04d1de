package generator

import "testing"

func TestRedactURL(t *testing.T) {
	tests := []struct{ in, want string }{
		{"http://127.0.0.1:8000/v1", "http://127.0.0.1:8000/v1"},
		{"https://user:secret@gpu-box:8000/v1", "https://user:xxxxx@gpu-box:8000/v1"},
		{"http://token@host/v1", "http://token@host/v1"}, // a user name alone is not masked by net/url
		{"http://a b@host:%zz/", "(unparsable URL)"},
		{"", ""},
	}
	for _, tc := range tests {
		if got := RedactURL(tc.in); got != tc.want {
			t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
