package hub

import (
	"path/filepath"
	"strings"
	"testing"
)

func TestParseHubPath(t *testing.T) {
	tests := []struct {
		in   string
		want hubRef
		err  bool
	}{
		{"hf://mlabonne/open-perfectblend", hubRef{repo: "mlabonne/open-perfectblend"}, false},
		{"hf://mlabonne/open-perfectblend/", hubRef{repo: "mlabonne/open-perfectblend"}, false},
		{"hf://datasets/mlabonne/open-perfectblend@v1.0/data/train-*.parquet", hubRef{repo: "mlabonne/open-perfectblend", rev: "v1.0", path: "data/train-*.parquet"}, false},
		{"hf://o/n@refs/convert/parquet/default/train", hubRef{repo: "o/n", rev: "refs/convert/parquet", path: "default/train"}, false},
		{"hf://o/n@refs%2Fpr%2F3", hubRef{repo: "o/n", rev: "refs/pr/3"}, false},
		{"hf://o/n@feature%2Fx/a.jsonl", hubRef{repo: "o/n", rev: "feature/x", path: "a.jsonl"}, false},
		{"hf://o/n@" + commit1, hubRef{repo: "o/n", rev: commit1}, false},
		{"hf://o", hubRef{}, true},
		{"hf://o/n@", hubRef{}, true},
		{"hf://o/../n", hubRef{}, true},
		{"hf://o/n/../../etc/passwd", hubRef{}, true},
		{"hf://o/n/a//b", hubRef{}, true},
		{"hf://o/n@refs/pr", hubRef{}, true},
		{"hf://o/n@a..b", hubRef{}, true},
		{"hf://o/n m", hubRef{}, true},
		{"data/x.jsonl", hubRef{}, true},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			got, err := parseHubPath(tt.in)
			if (err != nil) != tt.err {
				t.Fatalf("err = %v, want error %v", err, tt.err)
			}
			if err != nil {
				if !strings.Contains(err.Error(), tt.in) {
					t.Errorf("error %q does not name the path", err)
				}
				return
			}
			if got != tt.want {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
			if again, err := parseHubPath(got.String()); err != nil || again != got {
				t.Errorf("String() %q reads back as %+v, %v", got.String(), again, err)
			}
		})
	}
}

// FuzzParseHubPath: no panic; an accepted path reads back from its
// canonical form, and its parts stay inside a cache directory.
func FuzzParseHubPath(f *testing.F) {
	for _, s := range []string{"hf://o/n", "hf://datasets/o/n@main/data/*.parquet", "hf://o/n@refs/pr/1/x", "hf://o/n@%2e%2e/x", "hf://o/n/../x"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ref, err := parseHubPath(s)
		if err != nil {
			return
		}
		again, err := parseHubPath(ref.String())
		if err != nil || again != ref {
			t.Fatalf("%q → %+v → %q → %+v, %v", s, ref, ref.String(), again, err)
		}
		base := filepath.Join("cache", "datasets")
		p := filepath.Join(base, filepath.FromSlash(ref.repo), "sha")
		if ref.path != "" && !strings.ContainsAny(ref.path, "*?[") {
			p = filepath.Join(p, filepath.FromSlash(ref.path))
		}
		if rel, err := filepath.Rel(base, p); err != nil || !filepath.IsLocal(rel) {
			t.Fatalf("%q escapes the cache: %s", s, p)
		}
	})
}
