package dataset

import (
	"go/build"
	"strings"
	"testing"
)

// TestNoHTTPClient: the Hub's HTTP client lives in package dataset/hub,
// reached through Options.Remote, so that dataset and the packages that
// need only its types (generator/job, internal/export) link none of it.
func TestNoHTTPClient(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		if imp == "net/http" || strings.HasPrefix(imp, "net/http/") || strings.HasPrefix(imp, "github.com/synthgen/synthgen/dataset/") {
			t.Errorf("dataset imports %s; hf:// paths go through Options.Remote (remote.go)", imp)
		}
	}
}
