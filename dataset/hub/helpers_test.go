package hub

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/synthgen/synthgen/dataset"
)

// The tests read hf:// paths through package dataset, as the programs do,
// with Remote set where the options leave it nil.

func withRemote(o dataset.Options) dataset.Options {
	if o.Remote == nil {
		o.Remote = Remote{}
	}
	return o
}

func open(o dataset.Options) (*dataset.Reader, error) { return dataset.Open(withRemote(o)) }
func count(o dataset.Options) (int64, error)          { return dataset.Count(withRemote(o)) }
func identity(o dataset.Options) (string, error)      { return dataset.Identity(withRemote(o)) }

// at is the options that read path.
func at(path string) dataset.Options {
	return dataset.Options{Selection: dataset.Selection{Path: path}}
}

// testdataFile is a file of dataset's testdata, which the fake Hub serves.
func testdataFile(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll reads every prompt of opts and the rows skipped on the way; it
// fails the test on any error but io.EOF.
func readAll(t testing.TB, opts dataset.Options) ([]dataset.Prompt, []*dataset.RowError) {
	t.Helper()
	var skipped []*dataset.RowError
	opts.OnSkip = func(e *dataset.RowError) { skipped = append(skipped, e) }
	r, err := open(opts)
	if err != nil {
		t.Fatalf("open: %v", err)
	}
	defer r.Close()
	var out []dataset.Prompt
	for {
		p, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("next after %d prompts: %v", len(out), err)
		}
		out = append(out, p)
	}
	if got := r.Skipped(); got != int64(len(skipped)) {
		t.Errorf("Skipped() = %d, OnSkip called %d times", got, len(skipped))
	}
	return out, skipped
}

func ids(ps []dataset.Prompt) []string {
	out := make([]string, len(ps))
	for i, p := range ps {
		out[i] = p.ID
	}
	return out
}

// goldenIDs are the ids of the good rows of one of dataset's golden files.
func goldenIDs(t *testing.T, name string) []string {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var g struct {
			Bad bool   `json:"bad"`
			ID  string `json:"id"`
		}
		if err := json.Unmarshal(sc.Bytes(), &g); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if !g.Bad {
			out = append(out, g.ID)
		}
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// sharegptLine is a ShareGPT row; turns alternate from and value.
func sharegptLine(source string, turns ...string) string {
	var b bytes.Buffer
	b.WriteString(`{"conversations":[`)
	for i := 0; i+1 < len(turns); i += 2 {
		if i > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`{"from":` + quote(turns[i]) + `,"value":` + quote(turns[i+1]) + `}`)
	}
	b.WriteString(`],"source":` + quote(source) + "}")
	return b.String()
}

func quote(s string) string {
	b, _ := json.Marshal(s)
	return string(b)
}
