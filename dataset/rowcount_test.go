package dataset

import (
	"os"
	"testing"
	"time"
)

// Count after Stamp gives what Count reading the file gives, for every
// way lines end, and reads the file again once it changed.
func TestCountAfterStamp(t *testing.T) {
	for _, data := range []string{
		"",
		"{}",
		"{}\n",
		"{}\n\n  \n{}",
		"\xEF\xBB\xBF{}\n{}\n",
		"\xEF\xBB\xBF\n",
		"\xEF\xBB",
		"\r\n{}\r\n \t\r\n{}\r\n",
		"{\"a\":\"x\ny\"}\n",
		"not json\n{}\n   x\n",
	} {
		dir := t.TempDir()
		path := writeFile(t, dir, "d.jsonl", data)
		opts := Options{Selection: Selection{Path: path}}
		want, err := Count(opts) // nothing remembered: the file is read
		if err != nil {
			t.Fatal(err)
		}
		if _, err := Stamp(opts); err != nil {
			t.Fatal(err)
		}
		got, ok := rememberedRows(path)
		if !ok || got != want {
			t.Errorf("%q: Stamp counted %d (%v), Count reading the file %d", data, got, ok, want)
		}
		if n, err := Count(opts); err != nil || n != want {
			t.Errorf("%q: Count after Stamp = %d, %v; want %d", data, n, err, want)
		}
		if n, err := Count(Options{Selection: Selection{Path: path, Limit: 1}}); err != nil || n != min(want, 1) {
			t.Errorf("%q: Count with limit 1 = %d, %v", data, n, err)
		}
		// Changed after Stamp: read again.
		if err := os.WriteFile(path, []byte(data+"\n{}\n{}\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		later := time.Now().Add(time.Hour)
		if err := os.Chtimes(path, later, later); err != nil {
			t.Fatal(err)
		}
		if _, ok := rememberedRows(path); ok {
			t.Errorf("%q: a changed file's count is still remembered", data)
		}
		if n, err := Count(opts); err != nil || n != want+2 {
			t.Errorf("%q: Count of the changed file = %d, %v; want %d", data, n, err, want+2)
		}
	}
}
