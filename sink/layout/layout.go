// Package layout is the output directory: the one place that names every
// file and folder a run keeps in DIR (the manifest, the data and errors
// parts, the lock, the part logs, status, report, history, the batch
// ledger and its files, the hidden states). Every package that reads or
// writes DIR asks it for a path, so a new file is added here and nowhere
// else, and the list of names a directory may hold (Classify) cannot miss
// one. It imports only the standard library, so any package can use it.
package layout

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The names in the output directory.
const (
	ManifestName   = "manifest.json" // run identity, config without secrets, part list
	LockName       = ".lock"         // flock: one writer per directory
	StatusName     = "status.json"   // live heartbeat, rewritten atomically
	ReportName     = "report.json"   // final figures, written when a run ends
	HistoryName    = "history.jsonl" // every run's progress records, bounded
	BatchesName    = "batches.json"  // the batch mode's ledger
	BatchFilesName = "batches"       // the batch mode's input and output files
	DataName       = "data"          // record parts
	ErrorsName     = "errors"        // error-record parts
	HiddenName     = "hidden"        // hidden-state files kept for records
)

// HiddenSuffix ends the name of every hidden-state file.
const HiddenSuffix = ".safetensors"

// Inside DIR/hidden, beside the files: the log of those kept (one JSON
// line each, appended once a file is checked and in place) and the units
// the last pass could not get.
const (
	HiddenLogName    = "kept.jsonl"
	HiddenFailedName = "failed.jsonl"
)

// Dir is an output directory's path. Its methods give the path of each
// file or folder in it.
type Dir string

// Path is the directory itself.
func (d Dir) Path() string { return string(d) }

// Join is name (or a path below) inside the directory.
func (d Dir) Join(name ...string) string {
	return filepath.Join(append([]string{string(d)}, name...)...)
}

// Manifest is DIR/manifest.json.
func (d Dir) Manifest() string { return d.Join(ManifestName) }

// Lock is DIR/.lock.
func (d Dir) Lock() string { return d.Join(LockName) }

// Status is DIR/status.json.
func (d Dir) Status() string { return d.Join(StatusName) }

// Report is DIR/report.json.
func (d Dir) Report() string { return d.Join(ReportName) }

// History is DIR/history.jsonl.
func (d Dir) History() string { return d.Join(HistoryName) }

// Batches is DIR/batches.json, the batch mode's ledger.
func (d Dir) Batches() string { return d.Join(BatchesName) }

// BatchFiles is DIR/batches, the batch mode's input and output files.
func (d Dir) BatchFiles() string { return d.Join(BatchFilesName) }

// Data is DIR/data, the record parts.
func (d Dir) Data() string { return d.Join(DataName) }

// Errors is DIR/errors, the error-record parts.
func (d Dir) Errors() string { return d.Join(ErrorsName) }

// DataPart is the part of DIR/data by its file name.
func (d Dir) DataPart(name string) string { return d.Join(DataName, name) }

// ErrorsPart is the part of DIR/errors by its file name.
func (d Dir) ErrorsPart(name string) string { return d.Join(ErrorsName, name) }

// PartLog is the part log run appends to (see sink's partlog.go).
func (d Dir) PartLog(run int) string { return d.Join(PartLogName(run)) }

// Hidden is DIR/hidden, the hidden-state files kept for records.
func (d Dir) Hidden() string { return d.Join(HiddenName) }

// HiddenLog is DIR/hidden/kept.jsonl; HiddenFailed DIR/hidden/failed.jsonl.
func (d Dir) HiddenLog() string    { return d.Join(HiddenName, HiddenLogName) }
func (d Dir) HiddenFailed() string { return d.Join(HiddenName, HiddenFailedName) }

// HiddenFile is the hidden-state file of one turn (or generation) of the
// record with key (id, sample): DIR/hidden/HiddenFileName(id, sample, turn).
func (d Dir) HiddenFile(id string, sample, turn int) string {
	return d.Join(HiddenName, HiddenFileName(id, sample, turn))
}

// Leftovers is the glob of the temporaries an atomic rewrite of name
// (durable.WriteFile's .NAME.*.tmp) leaves when killed.
func (d Dir) Leftovers(name string) string { return d.Join("." + name + ".*.tmp") }

// PartLogName is the file name of the part log of run: manifest.shards.RUN.jsonl.
func PartLogName(run int) string { return fmt.Sprintf("manifest.shards.%d.jsonl", run) }

var partLogPattern = regexp.MustCompile(`^manifest\.shards\.\d+\.jsonl$`)

// IsPartLog reports whether name is a part log's name (current or stale).
func IsPartLog(name string) bool { return partLogPattern.MatchString(name) }

// maxIDName bounds the escaped id in a hidden file's name: file systems
// cap a name at 255 bytes, and ids are a dataset's (untrusted, any length).
const maxIDName = 160

// HiddenFileName names the hidden-state file of one turn of a record:
// ID.SAMPLE.TURN.safetensors (ID.SAMPLE.safetensors for turn < 0, the
// whole generation), ID escaped so that any id is one file name
// in DIR/hidden (no "/", no leading ".", only [A-Za-z0-9_-] and %XX) and
// two ids never share one (the empty id is "~"). An id whose escape passes maxIDName bytes is
// cut there and ends in "~" and its FNV-1a hash, which keeps it unique in
// practice and the name under the file system's bound.
func HiddenFileName(id string, sample, turn int) string {
	esc := escapeID(id)
	switch {
	case esc == "":
		esc = "~" // not a dot file; no escape is "~" alone
	case len(esc) > maxIDName:
		esc = esc[:maxIDName] + "~" + strconv.FormatUint(fnv64(id), 16)
	}
	if turn < 0 { // the whole generation, no turn of its own
		return esc + "." + strconv.Itoa(sample) + HiddenSuffix
	}
	return esc + "." + strconv.Itoa(sample) + "." + strconv.Itoa(turn) + HiddenSuffix
}

func escapeID(id string) string {
	var b strings.Builder
	for i := 0; i < len(id); i++ {
		c := id[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '_', c == '-':
			b.WriteByte(c)
		default:
			fmt.Fprintf(&b, "%%%02X", c)
		}
	}
	return b.String()
}

// fnv64 is FNV-1a: a hash that does not need a package for a name.
func fnv64(s string) uint64 {
	h := uint64(14695981039346656037)
	for i := 0; i < len(s); i++ {
		h ^= uint64(s[i])
		h *= 1099511628211
	}
	return h
}

// Kind says what a name at the top of an output directory is.
type Kind int

const (
	// Foreign is no file of a run: a directory holding only such names
	// is not a synthgen output.
	Foreign Kind = iota
	// Output marks a synthgen output: the manifest, data/ or errors/.
	Output
	// Beside is a file a run keeps beside its output (the lock, status,
	// report, history, part logs, the batch ledger and files, hidden
	// states, and any dot file: temporaries of atomic rewrites). Alone it
	// does not make a directory an output, nor a stranger's.
	Beside
)

// Classify says what name, an entry at the top of an output directory, is.
func Classify(name string) Kind {
	switch {
	case name == ManifestName || name == DataName || name == ErrorsName:
		return Output
	case name == LockName || name == StatusName || name == ReportName || name == HistoryName,
		name == BatchesName || name == BatchFilesName || name == HiddenName,
		IsPartLog(name), strings.HasPrefix(name, "."):
		return Beside
	}
	return Foreign
}

// CheckOwn refuses an output directory that is not the sink's to fill:
// the filesystem root (data/ and errors/ would land beside the system's),
// or a directory that already holds files and nothing of a synthgen output
// (the wrong path, say /data instead of /data/synth/run1).
func CheckOwn(dir string) error {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return fmt.Errorf("output.dir %s: %w", dir, err)
	}
	if filepath.Dir(abs) == abs {
		return fmt.Errorf("output.dir %s is the filesystem root: give the run a directory of its own, e.g. /data/synth/run1", dir)
	}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("output.dir %s: %w", dir, err)
	}
	var other []string
	for _, e := range entries {
		switch name := e.Name(); Classify(name) {
		case Output:
			return nil // a synthgen output (recovery decides what it holds)
		case Foreign:
			other = append(other, name)
		}
	}
	if len(other) == 0 {
		return nil
	}
	shown := other
	if len(shown) > 5 {
		shown = append(slices.Clone(shown[:5]), fmt.Sprintf("... %d in all", len(other)))
	}
	return fmt.Errorf("output.dir %s already holds %s and is not a synthgen output: choose a new or empty directory", dir, strings.Join(shown, ", "))
}

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
