package sink

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzRecoverTail: whatever bytes follow the complete lines of an .open
// part (a torn write, garbage, zeros from a filesystem), recovery never
// panics and never loses a complete earlier line: it either keeps every one
// of them and cuts only bytes after them (no '\n' followed, or from a line
// holding a NUL byte), or refuses with an error naming the file and leaves
// it untouched.
func FuzzRecoverTail(f *testing.F) {
	f.Add(uint8(3), []byte(`{"id":"9","sam`))
	f.Add(uint8(0), []byte("\x00\x00\x00\x00"))
	f.Add(uint8(2), []byte("{\"id\":\"x\",\"sample\":0}\n{\"id\""))
	f.Add(uint8(1), []byte("\n"))
	f.Add(uint8(5), []byte("not json\n"))
	f.Add(uint8(1), []byte(`{"sample":1,"id":"a\"b"}`+"\n"))
	f.Fuzz(func(t *testing.T, n uint8, tail []byte) {
		n %= 8
		prefix := jsonLinesF(t, int(n))
		path := filepath.Join(t.TempDir(), "part-000000.jsonl.open")
		orig := append([]byte(prefix), tail...)
		if err := os.WriteFile(path, orig, 0o644); err != nil {
			t.Fatal(err)
		}
		lines, err := recoverTail(path)
		got, rerr := os.ReadFile(path)
		if rerr != nil {
			t.Fatal(rerr)
		}
		if err != nil {
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error does not name the file: %v", err)
			}
			if !bytes.Equal(got, orig) {
				t.Error("refused recovery changed the file")
			}
			return
		}
		if !bytes.HasPrefix(got, []byte(prefix)) {
			t.Fatalf("complete lines lost: %q", got)
		}
		if !bytes.HasPrefix(orig, got) {
			t.Fatalf("recovery changed bytes instead of cutting: %q", got)
		}
		if len(got) > 0 && got[len(got)-1] != '\n' {
			t.Fatalf("recovered file ends mid-line: %q", got)
		}
		if lines < int(n) || lines != bytes.Count(got, []byte{'\n'}) {
			t.Fatalf("lines = %d, file has %d, prefix %d", lines, bytes.Count(got, []byte{'\n'}), n)
		}
		// What recovery kept, the final-part scan accepts.
		final := filepath.Join(filepath.Dir(path), "part-000000.jsonl")
		if err := os.Rename(path, final); err != nil {
			t.Fatal(err)
		}
		if _, err := scanJSONLKeys(final, func(Key, int) error { return nil }); err != nil {
			t.Fatalf("kept lines do not scan: %v", err)
		}
	})
}

func jsonLinesF(t *testing.T, n int) string {
	var b strings.Builder
	for i := range n {
		line, err := json.Marshal(testRecord(i))
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return b.String()
}

// FuzzLineKey: the key read back from a line the sink wrote is the key that
// was written, whatever the id holds (quotes, backslashes, control
// characters, non-ASCII); otherwise a resume would not see it as done and
// write it again.
func FuzzLineKey(f *testing.F) {
	f.Add("0", 0, "answer")
	f.Add(`a"b\c`, 3, "<b>&")
	f.Add("\u2028\x01é", -1, "")
	f.Add("", 1<<40, "x")
	f.Fuzz(func(t *testing.T, id string, sample int, content string) {
		if !utf8.ValidString(id) {
			return // Write refuses such ids
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		r := testRecord(1)
		r.ID, r.Sample, r.Content = id, sample, content
		if err := enc.Encode(r); err != nil {
			t.Fatal(err)
		}
		line := bytes.TrimSuffix(buf.Bytes(), []byte{'\n'})
		k, err := lineKey(line)
		if err != nil {
			t.Fatalf("lineKey(%q): %v", line, err)
		}
		if k != r.Key() {
			t.Fatalf("lineKey = %#v, want %#v", k, r.Key())
		}
	})
}

// FuzzLineKeyRaw: arbitrary bytes never panic the key extractor, and a key
// it accepts from valid JSON matches what encoding/json decodes, unless the
// object repeats the id or sample member (the sink never writes that).
func FuzzLineKeyRaw(f *testing.F) {
	f.Add([]byte(`{"id":"1","sample":0}`))
	f.Add([]byte(`{"id":"1","sample":-}`))
	f.Add([]byte(`{"id":"1","sample":99999999999999999999999}`))
	f.Add([]byte(`{"sample":2,"id":"x"}`))
	f.Fuzz(func(t *testing.T, line []byte) {
		k, err := lineKey(line)
		if err != nil || !json.Valid(line) {
			return
		}
		if bytes.Count(line, []byte(`"id"`)) > 1 || bytes.Count(line, []byte(`"sample"`)) > 1 {
			return
		}
		var v struct {
			ID     string `json:"id"`
			Sample int    `json:"sample"`
		}
		if err := json.Unmarshal(line, &v); err != nil {
			t.Fatalf("lineKey accepted %q, json.Unmarshal: %v", line, err)
		}
		if k != (Key{ID: v.ID, Sample: v.Sample}) {
			t.Fatalf("lineKey(%q) = %#v, json says %#v", line, k, v)
		}
	})
}
