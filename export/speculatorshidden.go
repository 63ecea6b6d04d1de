package export

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"

	"github.com/synthgen/synthgen/generator/hidden"
	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/internal/safetensors"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// The speculators-hidden format is the directory vllm-project/speculators'
// trainer reads offline (src/speculators/train/data.py, ArrowDataset, and
// hs_connectors' FileTransfer): a dataset saved by datasets'
// save_to_disk, whose rows it opens with load_from_disk (columns
// input_ids, loss_mask, seq_len, torch format), and beside them
// hidden_states/hs_<i>.safetensors for row i, the file vLLM's
// hidden-states connector writes: hidden_states [T, layers, hidden] and
// token_ids int64 [T], which the trainer requires to equal the row's
// input_ids. The pass keeps exactly that file (DIR/hidden/), checked, so
// the export reshapes nothing: it links it (a hard link costs no space;
// a copy only across file systems, where no link can be made) and checks
// again that its token_ids are the row's. The rows are the speculators
// format's (speculators.go), written as Arrow (speculatorsarrow.go).

// Names inside a speculators-hidden directory.
const (
	hsDirName    = "hidden_states"
	arrowName    = "data-00000-of-00001.arrow"
	dsInfoName   = "dataset_info.json"
	dsStateName  = "state.json"
	maxNoHidden  = 20
	hsNamePrefix = "hs_"

	// The tensors of a hidden-state file, as vLLM's connector names them
	// and speculators' trainer reads them (data.py, _get_raw_data).
	stTokenIDs     = "token_ids"
	stHiddenStates = "hidden_states"
)

// hsName is row i's file name in hidden_states/, as FileTransfer.get_cached
// builds it.
func hsName(i int64) string { return hsNamePrefix + strconv.FormatInt(i, 10) + layout.HiddenSuffix }

// hiddenKept maps a kept file's name (layout.HiddenFileName) to its path.
type hiddenKept map[string]string

// readHiddenKept reads the kept logs of dirs.
func readHiddenKept(dirs []string) (hiddenKept, error) {
	m := hiddenKept{}
	for _, d := range dirs {
		hd := layout.Dir(d).Hidden()
		l, err := hidden.ReadLog(hd)
		if err != nil {
			return nil, err
		}
		for name := range l.Files() {
			m[name] = filepath.Join(hd, name)
		}
	}
	return m, nil
}

// has returns the test of rec's turns for speculatorsKept: nil (every turn
// has a file) when m is nil, for the formats that need none.
func (m hiddenKept) has(rec *sink.Record) func(turn int) bool {
	if m == nil {
		return nil
	}
	return func(turn int) bool {
		_, ok := m[layout.HiddenFileName(rec.ID, rec.Sample, turn)]
		return ok
	}
}

// noHidden notes the rows of rec's answers ks that have no file.
func (s *Summary) noHidden(rec *sink.Record, several bool, ks []int) {
	for _, k := range ks {
		if len(s.NoHidden) < maxNoHidden {
			s.NoHidden = append(s.NoHidden, speculatorsRowID(rec, several, k))
		}
	}
}

// checkSpeculatorsHidden checks the options the format cannot take.
func (o *Options) checkSpeculatorsHidden() error {
	switch {
	case o.Out == "-":
		return errors.New("--format speculators-hidden: --out must be a directory to create (the rows and hidden_states/), not -")
	case o.HF:
		return errors.New("--format speculators-hidden: writes its own directory (a datasets save_to_disk and hidden_states/); leave out --hf")
	case o.Overwrite:
		// The trainer writes its vocabulary maps (d2t.npy, t2d.npy) into
		// the directory: replacing it whole would destroy them.
		return errors.New("--format speculators-hidden: --overwrite is not offered: remove the directory first (the trainer keeps d2t.npy and t2d.npy in it), or give a new path")
	}
	return nil
}

// newDirOut refuses an out that exists: speculators-hidden writes a new
// directory.
func newDirOut(out string) error {
	switch _, err := os.Lstat(out); {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return refuse("", "--out %s: %w", out, err)
	}
	return refuse("give --out the path of a new directory (remove this one to write it again)", "--out %s exists", out)
}

// writeSpeculatorsHidden writes Out as speculators' offline directory. It
// is built under a temporary name beside Out (temp.go), every file
// fsynced, and renamed to Out, as writeHF does: a killed export leaves a
// temporary the next export removes, never a partial directory under Out.
func writeSpeculatorsHidden(ctx context.Context, o Options, x *index, sum *Summary) (err error) {
	if err := newDirOut(o.Out); err != nil {
		return err
	}
	tmp, err := tempDir(o.Out)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = os.RemoveAll(tmp)
		}
	}()
	hsDir := filepath.Join(tmp, hsDirName)
	if err := os.Mkdir(hsDir, 0o755); err != nil {
		return err
	}
	aw, err := createArrowRows(filepath.Join(tmp, arrowName))
	if err != nil {
		return err
	}
	defer aw.abort()
	var n int64
	rows := rowsOf(ctx, o, x, shape[speculatorsRow]{records: speculatorsOf(o.Job, o.KeepTruncated)})
	err = rows(func(row speculatorsRow) error {
		src, ok := o.hidden[layout.HiddenFileName(row.PrimaryID, row.Metadata.Sample, row.turn)]
		if !ok {
			return nil // counted by buildIndex (the hidden_states filter)
		}
		if err := checkHiddenFile(src, row); err != nil {
			return err
		}
		copied, err := placeHidden(src, filepath.Join(hsDir, hsName(n)))
		if err != nil {
			return err
		}
		if copied {
			sum.HiddenCopied++
		} else {
			sum.HiddenLinked++
		}
		n++
		return aw.add(row)
	})
	if err != nil {
		return err
	}
	fingerprint, err := aw.close()
	if err != nil {
		return err
	}
	if n != sum.Exported {
		return fmt.Errorf("wrote %d rows, counted %d: the directories changed while exporting", n, sum.Exported)
	}
	if err := writeDatasetMeta(tmp, fingerprint); err != nil {
		return err
	}
	sum.Files = []string{arrowName, dsInfoName, dsStateName, hsDirName + "/" + hsNamePrefix + "<row>" + layout.HiddenSuffix}
	return finishDir(ctx, tmp, hsDir, o.Out)
}

// finishDir fsyncs the directories of a complete export tmp and renames it
// to out, unless ctx is done or out appeared meanwhile.
func finishDir(ctx context.Context, tmp, hsDir, out string) error {
	for _, d := range []string{hsDir, tmp} {
		if err := durable.SyncDir(d); err != nil {
			return err
		}
	}
	if err := os.Chmod(tmp, 0o755); err != nil {
		return err
	}
	if err := ctx.Err(); err != nil {
		return err // a signal after the last record still leaves Out as it was
	}
	if err := newDirOut(out); err != nil {
		return err // Out appeared while the export ran
	}
	if err := putInPlace(tmp, out); err != nil {
		return err
	}
	return durable.SyncDir(filepath.Dir(out))
}

// checkHiddenFile checks a kept file against its row as the trainer will:
// token_ids int64 equal to input_ids, hidden_states [T, layers, hidden].
// The pass checked it when it kept it; this finds a file changed or
// replaced since, which would train on states of other text.
func checkHiddenFile(path string, row speculatorsRow) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("row %s: %w", row.ID, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return fmt.Errorf("row %s: %w", row.ID, err)
	}
	sf, err := safetensors.Open(f, st.Size())
	if err != nil {
		return fmt.Errorf("row %s: %s: %w", row.ID, path, err)
	}
	ids, err := sf.Int64s(stTokenIDs, int64(len(row.InputIDs)))
	if err != nil {
		return fmt.Errorf("row %s: %s: %w", row.ID, path, err)
	}
	if !slices.Equal(ids, int64s(row.InputIDs)) {
		return fmt.Errorf("row %s: %s: its token_ids (%d) are not the row's input_ids (%d): the file was changed since the pass kept it; run the pass again after removing it and its line in kept.jsonl", row.ID, path, len(ids), len(row.InputIDs))
	}
	hs, ok := sf.Tensors[stHiddenStates]
	if !ok || len(hs.Shape) != 3 || hs.Shape[0] != int64(len(ids)) {
		return fmt.Errorf("row %s: %s: no %s tensor of shape [%d, layers, hidden]", row.ID, path, stHiddenStates, len(ids))
	}
	return nil
}

func int64s(v []int32) []int64 {
	out := make([]int64, len(v))
	for i, x := range v {
		out[i] = int64(x)
	}
	return out
}

// linkFile is os.Link; a test takes it away to see the copy across file
// systems.
var linkFile = os.Link

// placeHidden makes dst the kept file src: a hard link (the same bytes,
// no space spent, and the output directory's file stays kept), or across
// file systems, where no link can be made, an fsynced copy. It says
// whether it copied.
func placeHidden(src, dst string) (copied bool, err error) {
	err = linkFile(src, dst)
	if err == nil {
		return false, nil
	}
	if !errors.Is(err, syscall.EXDEV) {
		return false, fmt.Errorf("link %s: %w", src, err)
	}
	return true, copyFile(src, dst)
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	_, err = io.Copy(out, in)
	if err == nil {
		err = out.Sync()
	}
	if cerr := out.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return nil
}

// writeDatasetMeta writes the two JSON files load_from_disk reads beside
// the Arrow file: dataset_info.json (the features) and state.json (the
// data files, the fingerprint, and the torch format the trainer's
// torch.equal(token_ids, input_ids) needs: prepare_data.py's dataset is
// saved with set_format("torch")).
func writeDatasetMeta(dir string, fingerprint hash.Hash) error {
	info, err := json.MarshalIndent(map[string]any{
		"citation": "", "description": "", "homepage": "", "license": "",
		"features": dsFeatures,
	}, "", "  ")
	if err != nil {
		return err
	}
	state, err := json.MarshalIndent(map[string]any{
		"_data_files":         []map[string]string{{"filename": arrowName}},
		"_fingerprint":        hex.EncodeToString(fingerprint.Sum(nil))[:16],
		"_format_columns":     nil,
		"_format_kwargs":      map[string]any{},
		"_format_type":        "torch",
		"_output_all_columns": false,
		"_split":              nil,
	}, "", "  ")
	if err != nil {
		return err
	}
	if err := durable.WriteFile(filepath.Join(dir, dsInfoName), append(info, '\n'), 0o644); err != nil {
		return err
	}
	return durable.WriteFile(filepath.Join(dir, dsStateName), append(state, '\n'), 0o644)
}

// newFingerprint hashes the Arrow file as it is written: datasets takes
// any string, and the same rows give the same one.
func newFingerprint() hash.Hash { return sha256.New() }
