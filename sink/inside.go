package sink

import (
	"os"
	"path/filepath"
	"strings"
)

// DirAbove is the nearest directory at or above path's directory that is
// a synthgen output directory (it holds manifest.json), or "". A file
// written there would be read as the directory's own (export, view --html
// refuse it).
func DirAbove(path string) string {
	for dir := filepath.Dir(path); ; dir = filepath.Dir(dir) {
		if _, err := os.Stat(filepath.Join(dir, ManifestName)); err == nil {
			return dir
		}
		if parent := filepath.Dir(dir); parent == dir {
			return ""
		}
	}
}

// Within says whether path (absolute) is dir or below it.
func Within(path, dir string) bool {
	d, err := filepath.Abs(dir)
	if err != nil {
		return false
	}
	rel, err := filepath.Rel(d, path)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator))
}
