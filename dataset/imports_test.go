package dataset

import (
	"go/build"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const module = "github.com/synthgen/synthgen/"

// leaves are the sub-packages dataset imports, which import no dataset.
var leaves = map[string]bool{"shape": true, "template": true, "stamp": true}

// TestNoHTTPClient: the Hub's HTTP client lives in package dataset/hub,
// reached through Options.Remote, so that dataset and the packages that
// need only its types (generator/job, internal/export) link none of it.
// Of its own sub-packages dataset imports the leaves only (shape,
// template, stamp, internal/...): hub and outdir import dataset.
func TestNoHTTPClient(t *testing.T) {
	pkg, err := build.ImportDir(".", 0)
	if err != nil {
		t.Fatal(err)
	}
	for _, imp := range pkg.Imports {
		sub, own := strings.CutPrefix(imp, module+"dataset/")
		if imp == "net/http" || strings.HasPrefix(imp, "net/http/") || (own && !leaves[sub] && !strings.HasPrefix(sub, "internal/")) {
			t.Errorf("dataset imports %s; hf:// paths go through Options.Remote (remote.go)", imp)
		}
	}
}

// TestImportsOneWay: dataset and its sub-packages import neither generator
// nor sink (dataset/outdir, which reads an output directory through the
// sink, alone imports sink).
func TestImportsOneWay(t *testing.T) {
	err := filepath.WalkDir(".", func(path string, d os.DirEntry, err error) error {
		if err != nil || !d.IsDir() || d.Name() == "testdata" {
			return err
		}
		pkg, err := build.ImportDir(path, 0)
		if _, none := err.(*build.NoGoError); none {
			return nil
		} else if err != nil {
			return err
		}
		for _, imp := range pkg.Imports {
			rel, own := strings.CutPrefix(imp, module)
			switch {
			case !own:
			case strings.HasPrefix(rel, "generator"), strings.HasPrefix(rel, "sink") && path != "outdir":
				t.Errorf("dataset/%s imports %s", path, rel)
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
