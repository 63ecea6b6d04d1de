package view

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/sink"
)

// TestViewReportFile: the static report is one file with its scripts and
// styles inline (allowed by hash), the data as a JSON block, a sample of
// each finish reason, and nothing from a record unescaped.
func TestViewReportFile(t *testing.T) {
	v := makeViewDir(t, sink.FormatParquet)
	out := filepath.Join(t.TempDir(), "report.html")
	n, err := WriteReport(context.Background(), ReportOptions{Dirs: []string{v.dir}, Out: out})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(out)
	if err != nil || len(b) != n {
		t.Fatalf("%d bytes written, %d read: %v", n, len(b), err)
	}
	page := string(b)
	for _, want := range []string{`http-equiv="Content-Security-Policy"`, "sha256-", `id="view-data"`, "var uPlot=",
		`data-finish="length"`, `data-finish="stop"`, `data-finish="error: http_400"`, `data-dir="0"`} {
		if !strings.Contains(page, want) {
			t.Errorf("the report lacks %s", want)
		}
	}
	if m := regexp.MustCompile(`(?i)(src|href|action)="(https?:|/)[^"]*"`).FindString(page); m != "" {
		t.Errorf("the report refers elsewhere: %s", m)
	}
	if m := hostileMarkup.FindString(page); m != "" {
		t.Errorf("the report holds %q unescaped", m)
	}
}
