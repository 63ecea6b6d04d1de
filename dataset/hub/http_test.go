package hub

import (
	"net/url"
	"testing"
)

func TestNextLink(t *testing.T) {
	base, _ := url.Parse("https://huggingface.co/api/datasets/o/n/tree/main?recursive=true")
	tests := []struct{ in, want string }{
		{`<https://huggingface.co/api/datasets/o/n/tree/main?recursive=true&cursor=abc>; rel="next"`, "https://huggingface.co/api/datasets/o/n/tree/main?recursive=true&cursor=abc"},
		{`</api/x?cursor=2>; rel=next, <https://h/prev>; rel="prev"`, "https://huggingface.co/api/x?cursor=2"},
		{`<https://h/prev>; rel="prev"`, ""},
		{``, ""},
	}
	for _, tt := range tests {
		got, err := nextLink([]string{tt.in}, base)
		if err != nil || got != tt.want {
			t.Errorf("nextLink(%q) = %q, %v; want %q", tt.in, got, err, tt.want)
		}
	}
}
