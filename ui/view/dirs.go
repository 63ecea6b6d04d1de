package view

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/text/language"
	"golang.org/x/text/message"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// CheckDir refuses a path that is not an output directory: one with none
// of manifest.json, data/ and status.json.
func CheckDir(dir string) error {
	st, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("view: %w", err)
	}
	if !st.IsDir() {
		return fmt.Errorf("view %s: not a directory", dir)
	}
	d := layout.Dir(dir)
	for _, path := range []string{d.Manifest(), d.Data(), d.Status()} {
		if _, err := os.Stat(path); err == nil {
			return nil
		}
	}
	return fmt.Errorf("view %s: not a synthgen output directory (no %s, no %s/, no %s)", dir, layout.ManifestName, layout.DataName, layout.StatusName)
}

// Setting is one key of a run's configuration, dotted (generation.max_tokens).
type Setting struct {
	Key   string
	Value string
}

// DirInfo is what the run page says about one directory, read when asked:
// a live run rewrites status.json, and writes report.json when it ends.
type DirInfo struct {
	Index       int
	Path        string
	Manifest    *sink.Manifest
	ManifestErr string
	Job         *job.Job
	JobErr      string
	Config      []Setting // the manifest's config, without secrets
	Status      *runfiles.StatusRecord
	Report      *runfiles.ReportRecord
	Problems    []string // a status or report that does not read
	Live        bool     // status.json is newer than report.json and says running or draining
	// Batches are the batch mode's batches as batches.json records them
	// (the ledger a run rewrites before each step); none without it.
	Batches []runfiles.BatchEntry
}

// readDir reads dir's manifest, status.json and report.json.
func readDir(i int, dir string) DirInfo {
	d := DirInfo{Index: i, Path: dir}
	m, err := sink.ReadManifest(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		d.ManifestErr = "no " + sink.ManifestName
	case err != nil:
		d.ManifestErr = err.Error()
	default:
		d.Manifest = m
		if j, err := job.ManifestJob(dir, m.Job, m.Identity); err == nil {
			d.Job = &j
		} else {
			d.JobErr = err.Error()
		}
		d.Config = flatten("", m.Config, nil)
	}
	if bs, err := runfiles.ReadBatches(dir); err == nil {
		d.Batches = bs
	} else if !errors.Is(err, fs.ErrNotExist) {
		d.Problems = append(d.Problems, err.Error())
	}
	d.Status = readJSON[runfiles.StatusRecord](dir, runfiles.StatusFile, &d.Problems)
	d.Report = readJSON[runfiles.ReportRecord](dir, runfiles.ReportFile, &d.Problems)
	if s := d.Status; s != nil && (s.State == runfiles.StateRunning || s.State == runfiles.StateDraining) {
		d.Live = d.Report == nil || d.Report.EndedAt.Before(s.Time) || !d.Report.StartedAt.Equal(s.StartedAt)
	}
	return d
}

// readJSON reads dir/name into a T; nil when it does not exist, or does
// not decode (said in problems).
func readJSON[T any](dir, name string, problems *[]string) *T {
	b, err := os.ReadFile(filepath.Join(dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	var v T
	if err == nil {
		err = json.Unmarshal(b, &v)
	}
	if err != nil {
		*problems = append(*problems, fmt.Sprintf("%s: %v", filepath.Join(dir, name), err))
		return nil
	}
	return &v
}

// flatten lists a nested config map as dotted keys, sorted.
func flatten(prefix string, m map[string]any, out []Setting) []Setting {
	for _, k := range slices.Sorted(maps.Keys(m)) {
		key := k
		if prefix != "" {
			key = prefix + "." + k
		}
		if sub, ok := m[k].(map[string]any); ok && key != "generation.extra_body" {
			out = flatten(key, sub, out)
			continue
		}
		b, err := json.Marshal(m[k])
		v := string(b)
		if err != nil {
			v = fmt.Sprint(m[k])
		}
		out = append(out, Setting{Key: key, Value: strings.Trim(v, `"`)})
	}
	return out
}

// Figure is one figure of status.json or report.json, by its JSON key:
// Value as a person reads it (digits grouped, a rate to a tenth), Raw as
// the file spells it.
type Figure struct {
	Key   string
	Label string
	Value string
	Raw   string
}

// figureKeys are the figures the run page shows, in order, with a label
// that says whose each is: the job's (every run of the directory, earlier
// ones included) or this run's (the latest, since it started).
var figureKeys = []struct{ key, label string }{
	{"state", "state"},
	{"done", "keys done: job (earlier runs included)"},
	{"total", "keys: job"},
	{"already_done", "keys done before this run"},
	{"errors", "failed for good: this run"},
	{"retries", "attempts retried: this run"},
	{"in_flight", "in flight (keys holding a slot)"},
	{"tok_per_s", "tok/s: this run, whole"},
	{"tok_per_s_60s", "tok/s: this run, last 60 s"},
	{"req_per_s", "keys/s (req/s): this run, whole"},
	{"requests_per_s", "requests/s, every turn: this run, whole"},
	{"completion_tokens", "completion tokens: this run"},
	{"prompt_tokens", "prompt tokens: this run"},
	// With endpoint.price only (absent without).
	{"cost", "cost so far (USD): this run"},
	{"cost_projected", "cost projected to this run's end (USD)"},
	{"cost_billed", "billed, answers not kept too (USD): this run"},
	{"completion_avg", "completion mean: this run's answers"},
	{"completion_p50", "completion p50: this run's answers"},
	{"completion_p90", "completion p90: this run's answers"},
	{"completion_max", "completion max: this run's answers"},
	{"truncated_share", "share cut at max_tokens: this run's answers"},
	{"ttft_p50_s", "ttft p50 (s): this run's streamed answers"},
	{"ttft_p90_s", "ttft p90 (s): this run's streamed answers"},
	{"elapsed_s", "elapsed (s): this run"},
	{"written", "records written: this run"},
	{"error_records", "error records written: this run"},
	{"skipped", "keys already done: skipped by this run"},
	{"canceled", "requests cut by the stop: this run"},
	{"duration_s", "duration (s): this run"},
	{"exit_code", "exit code: this run"},
	{"error", "error"},
}

// noSample are the figures a run without any sample of them writes as 0:
// a time to first token is never 0, so 0 is "none was streamed" (the
// batch mode, stream: false), shown n/a.
var noSample = map[string]bool{"ttft_p50_s": true, "ttft_p90_s": true}

// Figures are the figures of v (a ReportRecord or StatusRecord), each as
// its JSON spells it, for the keys figureKeys lists that v has.
func Figures(v any) []Figure {
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var m map[string]json.RawMessage
	if json.Unmarshal(b, &m) != nil {
		return nil
	}
	var out []Figure
	for _, f := range figureKeys {
		raw, ok := m[f.key]
		if !ok {
			continue
		}
		val := string(raw)
		var s string
		if json.Unmarshal(raw, &s) == nil {
			val = s
		}
		shown := figureValue(val)
		if noSample[f.key] && val == "0" {
			shown = "n/a (no answer streamed)"
		}
		out = append(out, Figure{Key: f.key, Label: f.label, Value: shown, Raw: val})
	}
	return out
}

// figureValue is a figure as a person reads it: a whole number with its
// digits grouped (10,000), a fraction to a tenth from 100 up (6,067.9),
// to a hundredth from 1 (1.25), else to three significant digits (0.213);
// anything that is not a number as it is.
func figureValue(v string) string {
	if n, err := strconv.ParseInt(v, 10, 64); err == nil {
		return fmtNum(n)
	}
	f, err := strconv.ParseFloat(v, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return v
	}
	p := message.NewPrinter(language.English)
	switch a := math.Abs(f); {
	case a >= 100:
		return p.Sprintf("%.1f", f)
	case a >= 1:
		return p.Sprintf("%.2f", f)
	}
	return strconv.FormatFloat(f, 'g', 3, 64)
}

// RunRow is one run of the manifest as the run page lists it.
type RunRow struct {
	N               int
	Started, Ended  time.Time // Ended zero: the run never ended
	Outcome         string
	Records, Errors int64
}

// Runs are the manifest's runs, each with how it ended as inspect says it:
// a run that never closed the directory and was followed by another was
// killed (kill -9, OOM, a reboot); the last one may be running still.
func (d DirInfo) Runs() []RunRow {
	if d.Manifest == nil {
		return nil
	}
	runs := d.Manifest.Runs
	out := make([]RunRow, len(runs))
	for i, r := range runs {
		row := RunRow{N: i + 1, Started: r.StartedAt, Outcome: r.Outcome, Records: r.RecordsWritten, Errors: r.ErrorsWritten}
		switch {
		case r.EndedAt == nil && i < len(runs)-1:
			row.Outcome = "killed"
		case r.EndedAt == nil && d.Live:
			row.Outcome = "running"
		case r.EndedAt == nil:
			row.Outcome = "not ended: running, or killed"
		case r.Outcome == "":
			row.Ended, row.Outcome = *r.EndedAt, "ended" // a version that recorded no outcome
		default:
			row.Ended = *r.EndedAt
		}
		out[i] = row
	}
	return out
}

// utc is t as the CLI prints a time: ISO 8601, in UTC.
func utc(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format("2006-01-02 15:04:05Z")
}

// ago says how long ago t was, roughly.
func ago(t, now time.Time) string {
	d := now.Sub(t).Round(time.Second)
	if d < 0 {
		d = 0
	}
	return d.String() + " ago"
}
