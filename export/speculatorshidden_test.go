package export

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/apache/arrow-go/v18/arrow/array"
	"github.com/apache/arrow-go/v18/arrow/ipc"

	"github.com/synthgen/synthgen/generator/hidden"
	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/safetensors"
	"github.com/synthgen/synthgen/mockserver/hiddenstates"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

const hsLayers, hsHidden = 3, 4

// hiddenDir is speculatorsDir (whole conversations, two samples, a cut
// turn) after the real hidden-state pass against the mock extraction
// server on loopback: every turn with ids has a kept file in DIR/hidden/.
func hiddenDir(t *testing.T) string {
	t.Helper()
	dir := speculatorsDir(t, sink.FormatJSONL)
	opts := hiddenstates.Options{Dir: t.TempDir(), Layers: hsLayers, Hidden: hsHidden}
	srv := hiddenstates.New(opts)
	ts := httptest.NewServer(srv)
	t.Cleanup(func() { ts.Close(); srv.Wait() })
	cfg := hidden.Config{BaseURL: ts.URL + "/v1", Model: "m", Dir: opts.Dir, Layers: hsLayers, HiddenSize: hsHidden,
		Attempts: 3, Backoff: backoff.Policy{Initial: time.Microsecond, Max: time.Millisecond}, Workers: 2}
	res, err := hidden.Run(context.Background(), dir, cfg, hidden.Hooks{})
	if err != nil {
		t.Fatalf("hidden pass: %v", err)
	}
	if res.Kept != 8 || len(res.Failed) != 0 {
		t.Fatalf("hidden pass kept %d, failed %v; want the 8 turns", res.Kept, res.Failed)
	}
	return dir
}

// arrowRowsOf reads back a speculators-hidden directory's Arrow stream.
func arrowRowsOf(t *testing.T, out string) (ids, masks [][]int64, lens []int64) {
	t.Helper()
	f, err := os.Open(filepath.Join(out, arrowName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	if got := r.Schema().String(); !strings.Contains(got, "input_ids: type=list<item: int64, nullable>") ||
		!strings.Contains(got, "loss_mask: type=list<item: int64, nullable>") || !strings.Contains(got, "seq_len: type=int64") {
		t.Fatalf("schema %s", got)
	}
	for r.Next() {
		rec := r.RecordBatch()
		for i := 0; i < int(rec.NumRows()); i++ {
			for c, dst := range []*[][]int64{&ids, &masks} {
				l := rec.Column(c).(*array.List)
				from, to := l.ValueOffsets(i)
				*dst = append(*dst, slices.Clone(l.ListValues().(*array.Int64).Int64Values()[from:to]))
			}
			lens = append(lens, rec.Column(2).(*array.Int64).Value(i))
		}
	}
	if err := r.Err(); err != nil {
		t.Fatal(err)
	}
	return ids, masks, lens
}

// TestSpeculatorsHiddenReadBack: every row of the Arrow stream has its
// hidden_states/hs_<row>.safetensors, read back with internal/safetensors:
// the tensors the trainer reads under their names and shapes, token_ids
// equal to the row's input_ids and to the record's prompt then answer ids
// (the speculators export's row), the file the kept one itself (a hard
// link), the cut turn left out as --format speculators leaves it.
func TestSpeculatorsHiddenReadBack(t *testing.T) {
	dir := hiddenDir(t)
	plain := filepath.Join(t.TempDir(), "rows.jsonl")
	run(t, options(t, FormatSpeculators, plain, dir))
	want := readSpeculators(t, plain)
	out := filepath.Join(t.TempDir(), "spec")
	sum := run(t, options(t, FormatSpeculatorsHidden, out, dir))
	ids, masks, lens := arrowRowsOf(t, out)
	if len(ids) != len(want) || sum.Exported != int64(len(want)) || sum.HiddenLinked != int64(len(want)) || sum.HiddenCopied != 0 {
		t.Fatalf("%d rows, summary %d (%d linked, %d copied); want %d linked", len(ids), sum.Exported, sum.HiddenLinked, sum.HiddenCopied, len(want))
	}
	entries, _ := os.ReadDir(filepath.Join(out, hsDirName))
	if len(entries) != len(want) {
		t.Errorf("%d files in hidden_states/, want %d", len(entries), len(want))
	}
	for i, row := range want {
		if !slices.Equal(ids[i], int64s(row.InputIDs)) || !slices.Equal(masks[i], int64s(row.LossMask)) || lens[i] != int64(len(row.InputIDs)) {
			t.Errorf("row %d (%s): ids %v mask %v len %d; want %v %v", i, row.ID, ids[i], masks[i], lens[i], row.InputIDs, row.LossMask)
		}
		path := filepath.Join(out, hsDirName, fmt.Sprintf("hs_%d.safetensors", i))
		b, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		f, err := safetensors.Open(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if names := slices.Sorted(mapKeys(f.Tensors)); !slices.Equal(names, []string{"hidden_states", "token_ids"}) {
			t.Errorf("%s: tensors %v", path, names)
		}
		T := int64(len(row.InputIDs))
		if hs := f.Tensors["hidden_states"]; !slices.Equal(hs.Shape, []int64{T, hsLayers, hsHidden}) || hs.DType != safetensors.BF16 {
			t.Errorf("%s: hidden_states %s %v, want BF16 [%d %d %d]", path, hs.DType, hs.Shape, T, hsLayers, hsHidden)
		}
		tok, err := f.Int64s("token_ids", T)
		if err != nil || !slices.Equal(tok, ids[i]) || !slices.Equal(f.Tensors["token_ids"].Shape, []int64{T}) {
			t.Errorf("%s: token_ids %v (%v), want the row's %v", path, tok, err, ids[i])
		}
		// The rows read back from JSON have no turn: every record here is
		// a whole conversation, whose turn k is row _gen<k>.
		turn, _ := strconv.Atoi(row.ID[strings.LastIndex(row.ID, "_gen")+len("_gen"):])
		kept, _ := os.Stat(layout.Dir(dir).HiddenFile(row.PrimaryID, row.Metadata.Sample, turn))
		mine, _ := os.Stat(path)
		if kept == nil || mine == nil || !os.SameFile(kept, mine) {
			t.Errorf("%s is not a link of the kept file of %s", path, row.ID)
		}
	}
}

func mapKeys[V any](m map[string]V) func(func(string) bool) {
	return func(yield func(string) bool) {
		for k := range m {
			if !yield(k) {
				return
			}
		}
	}
}

// TestSpeculatorsHiddenGolden: the directory's layout, its datasets
// metadata and which kept file each row's hs_<row> is.
func TestSpeculatorsHiddenGolden(t *testing.T) {
	dir := hiddenDir(t)
	out := filepath.Join(t.TempDir(), "spec")
	run(t, options(t, FormatSpeculatorsHidden, out, dir))
	var b strings.Builder
	_ = filepath.WalkDir(out, func(p string, d os.DirEntry, err error) error {
		rel, _ := filepath.Rel(out, p)
		if err == nil && !d.IsDir() {
			fmt.Fprintf(&b, "file %s\n", filepath.ToSlash(rel))
		}
		return nil
	})
	for _, name := range []string{dsInfoName, dsStateName} {
		data, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&b, "== %s\n%s", name, data)
	}
	hd := layout.Dir(dir).Hidden()
	entries, _ := os.ReadDir(hd)
	ids, _, _ := arrowRowsOf(t, out)
	for i := range ids {
		st, err := os.Stat(filepath.Join(out, hsDirName, hsName(int64(i))))
		if err != nil {
			t.Fatal(err)
		}
		kept := "(no kept file)"
		for _, e := range entries {
			if k, err := os.Stat(filepath.Join(hd, e.Name())); err == nil && os.SameFile(k, st) {
				kept = e.Name()
			}
		}
		fmt.Fprintf(&b, "hs_%d = DIR/hidden/%s input_ids %v\n", i, kept, ids[i])
	}
	golden(t, "speculators-hidden.golden", []byte(b.String()))
}

// TestSpeculatorsHiddenMissingFile: a turn whose kept file is gone from
// the log (the pass failed for it, or never reached it) loses its row,
// counted by the hidden_states filter and named; with no file at all the
// export is refused as one that keeps nothing.
func TestSpeculatorsHiddenMissingFile(t *testing.T) {
	dir := hiddenDir(t)
	logPath := layout.Dir(dir).HiddenLog()
	data, err := os.ReadFile(logPath)
	if err != nil {
		t.Fatal(err)
	}
	var keep []string
	var gone hidden.Entry
	for _, line := range strings.SplitAfter(string(data), "\n") {
		var e hidden.Entry
		if line != "" && json.Unmarshal([]byte(line), &e) == nil && e.ID == "a" && e.Sample == 1 && e.Turn == 1 {
			gone = e
			continue
		}
		keep = append(keep, line)
	}
	if gone.File == "" {
		t.Fatal("no kept line for a/1/1")
	}
	if err := os.WriteFile(logPath, []byte(strings.Join(keep, "")), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(layout.Dir(dir).Hidden(), gone.File)); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "spec")
	sum := run(t, options(t, FormatSpeculatorsHidden, out, dir))
	ids, _, _ := arrowRowsOf(t, out)
	if sum.Exported != 6 || len(ids) != 6 || sum.dropped(FilterHiddenStates) != 1 || !slices.Equal(sum.NoHidden, []string{"a_s1_gen1"}) {
		t.Fatalf("exported %d (%d in the file), hidden_states dropped %d, named %v; want 6, 1, [a_s1_gen1]", sum.Exported, len(ids), sum.dropped(FilterHiddenStates), sum.NoHidden)
	}
	var text bytes.Buffer
	sum.WriteText(&text, 1)
	if !strings.Contains(text.String(), "a_s1_gen1") || !strings.Contains(text.String(), "hidden_states") {
		t.Errorf("summary does not name the row: %s", text.String())
	}
	if err := os.WriteFile(logPath, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	out2 := filepath.Join(t.TempDir(), "none")
	_, err = Run(context.Background(), options(t, FormatSpeculatorsHidden, out2, dir))
	var nothing *NothingKeptError
	if !errors.As(err, &nothing) || !strings.Contains(err.Error(), "hidden_states took 7") {
		t.Fatalf("no kept file: %v, want a NothingKeptError of the hidden_states filter", err)
	}
	if _, err := os.Lstat(out2); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s written: %v", out2, err)
	}
}

// TestSpeculatorsHiddenChangedFile: a kept file whose token ids are no
// longer the record's (replaced since the pass) stops the export naming
// the row and the file; nothing appears under Out and no temporary stays.
func TestSpeculatorsHiddenChangedFile(t *testing.T) {
	dir := hiddenDir(t)
	hd := layout.Dir(dir).Hidden()
	a := filepath.Join(hd, layout.HiddenFileName("a", 0, 0))
	b := filepath.Join(hd, layout.HiddenFileName("b", 0, 1))
	data, err := os.ReadFile(b)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(a, data, 0o644); err != nil {
		t.Fatal(err)
	}
	parent := t.TempDir()
	out := filepath.Join(parent, "spec")
	_, err = Run(context.Background(), options(t, FormatSpeculatorsHidden, out, dir))
	if err == nil || !strings.Contains(err.Error(), "a_s0_gen0") || !strings.Contains(err.Error(), a) {
		t.Fatalf("changed file: %v, want an error naming the row and %s", err, a)
	}
	if entries, _ := os.ReadDir(parent); len(entries) != 0 {
		t.Errorf("left in %s: %v", parent, entries)
	}
}

// TestSpeculatorsHiddenCopiesAcrossFileSystems: where no link can be made
// across file systems (EXDEV), the file is copied, byte for byte, and
// counted as copied.
func TestSpeculatorsHiddenCopiesAcrossFileSystems(t *testing.T) {
	dir := hiddenDir(t)
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EXDEV} }
	t.Cleanup(func() { linkFile = os.Link })
	out := filepath.Join(t.TempDir(), "spec")
	sum := run(t, options(t, FormatSpeculatorsHidden, out, dir))
	if sum.HiddenCopied != 7 || sum.HiddenLinked != 0 {
		t.Fatalf("%d copied, %d linked; want 7 copied", sum.HiddenCopied, sum.HiddenLinked)
	}
	got, err := os.ReadFile(filepath.Join(out, hsDirName, hsName(0)))
	if err != nil {
		t.Fatal(err)
	}
	want, _ := os.ReadFile(filepath.Join(layout.Dir(dir).Hidden(), layout.HiddenFileName("a", 0, 0)))
	if !bytes.Equal(got, want) {
		t.Error("hs_0 is not the kept file's bytes")
	}
	linkFile = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	_, err = Run(context.Background(), options(t, FormatSpeculatorsHidden, filepath.Join(t.TempDir(), "x"), dir))
	if !errors.Is(err, syscall.EPERM) {
		t.Errorf("a link refused on one file system: %v, want the error, not a silent copy", err)
	}
}

// TestSpeculatorsHiddenRefusals: the output is a new directory: an
// existing path, -, --hf and --overwrite are refused before anything is read.
func TestSpeculatorsHiddenRefusals(t *testing.T) {
	dir := speculatorsDir(t, sink.FormatJSONL)
	existing := t.TempDir()
	_, err := Run(context.Background(), options(t, FormatSpeculatorsHidden, existing, dir))
	var refused *RefusedError
	if !errors.As(err, &refused) {
		t.Errorf("existing --out: %v, want a refusal", err)
	}
	for name, o := range map[string]Options{
		"stdout":    {Format: FormatSpeculatorsHidden, Out: "-"},
		"hf":        {Format: FormatSpeculatorsHidden, Out: "x", HF: true},
		"overwrite": {Format: FormatSpeculatorsHidden, Out: "x", Overwrite: true},
	} {
		if err := o.Check(); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
}

// TestSpeculatorsHiddenKilledLeftover: the temporary directory of an export
// killed midway (links to kept files in it) is removed by the next export
// of the same --out, which says so, and the kept files, whose links it
// held, stay whole.
func TestSpeculatorsHiddenKilledLeftover(t *testing.T) {
	dir := hiddenDir(t)
	parent := t.TempDir()
	out := filepath.Join(parent, "spec")
	left := filepath.Join(parent, ".spec"+tempTag+"12345.tmp")
	if err := os.MkdirAll(filepath.Join(left, hsDirName), 0o755); err != nil {
		t.Fatal(err)
	}
	keptPath := filepath.Join(layout.Dir(dir).Hidden(), layout.HiddenFileName("a", 0, 0))
	before, err := os.ReadFile(keptPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Link(keptPath, filepath.Join(left, hsDirName, hsName(0))); err != nil {
		t.Fatal(err)
	}
	var log bytes.Buffer
	o := options(t, FormatSpeculatorsHidden, out, dir)
	o.Log = &log
	run(t, o)
	if _, err := os.Lstat(left); !errors.Is(err, os.ErrNotExist) || !strings.Contains(log.String(), left) {
		t.Errorf("leftover %s: %v; log %q", left, err, log.String())
	}
	after, err := os.ReadFile(keptPath)
	if err != nil || !bytes.Equal(before, after) {
		t.Errorf("kept file after the leftover was removed: %v, same bytes %v", err, bytes.Equal(before, after))
	}
}

// TestSpeculatorsHiddenBatches: rows split over several record batches (by
// rows, then by values) read back as the same rows.
func TestSpeculatorsHiddenBatches(t *testing.T) {
	dir := hiddenDir(t)
	one := filepath.Join(t.TempDir(), "one")
	run(t, options(t, FormatSpeculatorsHidden, one, dir))
	wantIDs, wantMasks, wantLens := arrowRowsOf(t, one)
	rows, vals := arrowBatchRows, arrowBatchValues
	t.Cleanup(func() { arrowBatchRows, arrowBatchValues = rows, vals })
	for _, bound := range [][2]int{{2, 1 << 20}, {1000, 12}} {
		arrowBatchRows, arrowBatchValues = bound[0], bound[1]
		out := filepath.Join(t.TempDir(), "many")
		run(t, options(t, FormatSpeculatorsHidden, out, dir))
		ids, masks, lens := arrowRowsOf(t, out)
		if n := arrowBatches(t, out); n < 3 {
			t.Errorf("batches of %v: %d record batches, want several", bound, n)
		}
		if !slices.EqualFunc(ids, wantIDs, slices.Equal) || !slices.EqualFunc(masks, wantMasks, slices.Equal) || !slices.Equal(lens, wantLens) {
			t.Errorf("batches of %v: rows differ from one batch's", bound)
		}
	}
}

func arrowBatches(t *testing.T, out string) int {
	t.Helper()
	f, err := os.Open(filepath.Join(out, arrowName))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := ipc.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Release()
	n := 0
	for r.Next() {
		n++
	}
	return n
}
