package promscrape

import (
	"strings"
	"testing"
)

// TestHealth: over a run of scrapes, each outage is reported once, when it
// begins, and its end once, at the first scrape that answers.
func TestHealth(t *testing.T) {
	tests := []struct {
		scrapes string // one letter a scrape: o answered, x failed
		want    string // what is reported: down at an outage's first x, up at the o that ends it
	}{
		{"ooo", ""},
		{"x", "down"},
		{"xxxx", "down"},
		{"oxxo", "down up"},
		{"xoxxxoox", "down up down up down"},
	}
	for _, tc := range tests {
		t.Run(tc.scrapes, func(t *testing.T) {
			var h Health
			var said []string
			for _, s := range tc.scrapes {
				switch s {
				case 'x':
					if h.Failed() {
						said = append(said, "down")
					}
				case 'o':
					if h.Answered() {
						said = append(said, "up")
					}
				}
			}
			if got := strings.Join(said, " "); got != tc.want {
				t.Errorf("scrapes %s reported %q, want %q", tc.scrapes, got, tc.want)
			}
		})
	}
}
