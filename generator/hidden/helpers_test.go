package hidden

import (
	"bytes"
	"context"
	"encoding/binary"
	"encoding/json"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/safetensors"
	"github.com/synthgen/synthgen/mockserver/hiddenstates"
	"github.com/synthgen/synthgen/sink"
)

const testLayers, testHidden = 3, 4

// ids makes a deterministic id list of n tokens for seed.
func ids(seed, n int) []int32 {
	out := make([]int32, n)
	for i := range out {
		out[i] = int32(100 + (seed*13+i*7)%900)
	}
	return out
}

// writeRun writes an output directory of n records with token ids, every
// fifth a whole conversation of two turns, as a first pass leaves it.
func writeRun(t *testing.T, n int) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "data"), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "data", "part-000000.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	enc := json.NewEncoder(f)
	for i := range n {
		rec := sink.Record{ID: "row" + string(rune('a'+i%26)) + "/" + itoa(i), Messages: []chat.Message{{Role: "user", Content: "q"}}}
		if i%5 == 4 {
			rec.Turns = []sink.Turn{
				{PromptTokenIDs: ids(i, 5), TokenIDs: ids(i+1000, 4)},
				{PromptTokenIDs: ids(i+2000, 11), TokenIDs: ids(i+3000, 3)},
			}
		} else {
			rec.PromptTokenIDs, rec.TokenIDs = ids(i, 6+i%5), ids(i+1000, 3+i%7)
		}
		if err := enc.Encode(&rec); err != nil {
			t.Fatal(err)
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return dir
}

func itoa(i int) string { b, _ := json.Marshal(i); return string(b) }

// connector starts the mock extraction server on loopback writing under a
// fresh directory, and a config that talks to it.
func connector(t *testing.T, opts hiddenstates.Options) (*hiddenstates.Server, Config) {
	t.Helper()
	if opts.Dir == "" {
		opts.Dir = t.TempDir()
	}
	opts.Layers, opts.Hidden = testLayers, testHidden
	srv := hiddenstates.New(opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Wait() })
	return srv, Config{
		BaseURL: ts.URL + "/v1", Model: "m", Dir: opts.Dir, Layers: testLayers, HiddenSize: testHidden,
		Attempts: 20, Backoff: backoff.Policy{Initial: time.Microsecond, Max: time.Millisecond}, Workers: 4,
	}
}

// checkKept holds every unit of outDir to exactly one kept file whose
// token ids are its ids and whose values are the server's, and the log's
// bytes to the files' sizes.
func checkKept(t *testing.T, outDir string) {
	t.Helper()
	us, err := Units(outDir)
	if err != nil {
		t.Fatal(err)
	}
	log, err := OpenLog(filepath.Join(outDir, DirName))
	if err != nil {
		t.Fatal(err)
	}
	defer log.Close()
	files := log.Files()
	if len(files) != len(us) {
		t.Errorf("%d kept files for %d units", len(files), len(us))
	}
	var size int64
	for _, u := range us {
		e, ok := files[u.FileName()]
		if !ok {
			t.Errorf("%s: not kept", u.FileName())
			continue
		}
		path := filepath.Join(outDir, DirName, e.File)
		st, err := os.Stat(path)
		if err != nil {
			t.Errorf("%s: %v", e.File, err)
			continue
		}
		size += st.Size()
		if st.Size() != e.Bytes {
			t.Errorf("%s: %d bytes logged, %d on disk", e.File, e.Bytes, st.Size())
		}
		checkValues(t, path, u.IDs)
	}
	if got := log.Bytes(); got != size {
		t.Errorf("log says %d bytes kept, the files hold %d", got, size)
	}
	entries, _ := os.ReadDir(filepath.Join(outDir, DirName))
	for _, e := range entries {
		if _, ok := files[e.Name()]; !ok && e.Name() != LogName && e.Name() != FailedName {
			t.Errorf("unkept file %s in %s", e.Name(), DirName)
		}
	}
}

func checkValues(t *testing.T, path string, want []int64) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	f, err := safetensors.Open(bytes.NewReader(b), int64(len(b)))
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	got, err := f.Int64s("token_ids", 1<<20)
	if err != nil || len(got) != len(want) {
		t.Fatalf("%s: token_ids %v, %v", path, got, err)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("%s: token_ids[%d] = %d, want %d", path, i, got[i], want[i])
		}
	}
	hs := f.Tensors["hidden_states"]
	data := b[f.DataStart+hs.Begin : f.DataStart+hs.End]
	for p := range want {
		for l := range testLayers {
			for d := range testHidden {
				v := binary.LittleEndian.Uint16(data[2*((p*testLayers+l)*testHidden+d):])
				if v != hiddenstates.Value(want[p], p, l, d) {
					t.Fatalf("%s: value [%d,%d,%d] = %#x, not the server's", path, p, l, d, v)
				}
			}
		}
	}
}

func run(t *testing.T, outDir string, cfg Config) Result {
	t.Helper()
	res, err := Run(context.Background(), outDir, cfg, Hooks{})
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	return res
}

// leftovers lists what is left in the server's directory.
func leftovers(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}
