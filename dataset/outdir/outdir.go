// Package outdir reads a synthgen output directory as a dataset (a first
// pass read by a second one): dataset.Outputs over the sink's own readers
// of its manifest, its lock and its parts.
package outdir

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/dataset/stamp"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// Reader is dataset.Outputs for directories the sink wrote.
type Reader struct{}

var _ dataset.Outputs = Reader{}

// Manifest is the sink's manifest name, which makes a directory an output
// directory.
func (Reader) Manifest() string { return sink.ManifestName }

// Stamp identifies dir as dataset.Outputs says: it refuses a directory a
// live run holds, one whose records are not all in the final parts its
// manifest lists (a killed run's .open or .journal parts, or a part it
// finalized and did not list), and a part whose bytes are not the ones
// recorded when it was written.
func (Reader) Stamp(dir string) (stamp.Output, error) {
	h, held, err := sink.HeldBy(dir)
	if err != nil {
		return stamp.Output{}, fmt.Errorf("dataset %s: %w", dir, err)
	}
	if held {
		return stamp.Output{}, fmt.Errorf("dataset %s is being written by %s: a pass reads an output directory whose run has ended; wait for it to end, or stop it", dir, h)
	}
	m, err := sink.ReadManifest(dir)
	if err != nil {
		return stamp.Output{}, fmt.Errorf("dataset %s: %w", dir, err)
	}
	listed := map[string]sink.PartInfo{}
	for _, p := range m.Parts {
		listed[p.Name] = p
	}
	dataDir := layout.Dir(dir).Data()
	entries, err := os.ReadDir(dataDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return stamp.Output{}, fmt.Errorf("dataset %s: %w", dir, err)
	}
	for _, e := range entries {
		p, ok := sink.ParsePart(e.Name())
		switch {
		case !ok:
			continue
		case p.Suffix != "":
			return stamp.Output{}, fmt.Errorf("dataset %s: data/%s is not final: the run that wrote the directory did not end (killed?); run it again to its end (it resumes), then start this pass", dir, e.Name())
		case listed[e.Name()].Name == "":
			return stamp.Output{}, fmt.Errorf("dataset %s: data/%s is not in its manifest: the run that wrote the directory did not end (killed?); run it again to its end (it resumes), then start this pass", dir, e.Name())
		}
	}
	parts := slices.Clone(m.Parts)
	slices.SortFunc(parts, func(a, b sink.PartInfo) int {
		pa, _ := sink.ParsePart(a.Name)
		pb, _ := sink.ParsePart(b.Name)
		return pa.Index - pb.Index
	})
	s := stamp.Output{JobHash: m.Hash(), Samples: samples(m)}
	for _, p := range parts {
		path := filepath.Join(dataDir, p.Name)
		st, err := os.Stat(path)
		if err != nil {
			return stamp.Output{}, fmt.Errorf("dataset %s: its manifest lists data/%s: %w", dir, p.Name, err)
		}
		sum, err := sink.PartHash(path)
		if err != nil {
			return stamp.Output{}, fmt.Errorf("dataset %s: %w", dir, err)
		}
		if p.XXH64 != "" && (sum != p.XXH64 || st.Size() != p.Size) {
			return stamp.Output{}, fmt.Errorf("dataset %s: data/%s is not what was written (%d bytes, xxh64 %s; %d, %s when written): run synthgen inspect %s", dir, p.Name, st.Size(), sum, p.Size, p.XXH64, dir)
		}
		s.Parts = append(s.Parts, stamp.Part{Name: p.Name, Records: p.Records, Size: st.Size(), XXH64: sum})
	}
	return s, nil
}

// samples is the largest generation.n of the jobs that wrote m's records
// (1 when none says): the second pass's ids carry the sample when it is
// above 1.
func samples(m *sink.Manifest) int {
	n := 1
	read := func(spec json.RawMessage) {
		var j struct {
			Sampling struct {
				N int `json:"n"`
			} `json:"sampling"`
		}
		if json.Unmarshal(spec, &j) == nil {
			n = max(n, j.Sampling.N)
		}
	}
	if len(m.Job) > 0 {
		read(m.Job)
	}
	for _, spec := range m.Jobs {
		read(spec)
	}
	if m.Identity != nil {
		if v, err := strconv.Atoi(m.Identity.Answer["generation.n"]); err == nil {
			n = max(n, v)
		}
	}
	return n
}

// errStop ends sink.ForEachRecord when yield has had enough.
var errStop = errors.New("stop")

// Records reads the part at path with sink.ForEachRecord, each record's
// row its JSON (numbers as json.Number).
func (Reader) Records(path string, yield func(id string, sample int, row func() map[string]any) bool) error {
	err := sink.ForEachRecord(path, func(rec *sink.Record, _ sink.Span) error {
		row := func() map[string]any { return recordRow(rec) }
		if !yield(rec.ID, rec.Sample, row) {
			return errStop
		}
		return nil
	})
	if errors.Is(err, errStop) {
		return nil
	}
	return err
}

// Lines is sink.Lines: a JSONL part's records are its lines.
func (Reader) Lines(path string) bool { return sink.Lines(path) }

// recordRow is a record as a row: its fields by their JSON names, as a
// dataset row of a JSON line decodes.
func recordRow(rec *sink.Record) map[string]any {
	b, err := json.Marshal(rec)
	if err != nil {
		return map[string]any{"id": rec.ID, "sample": json.Number(strconv.Itoa(rec.Sample))}
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var row map[string]any
	if dec.Decode(&row) != nil {
		return map[string]any{"id": rec.ID, "sample": json.Number(strconv.Itoa(rec.Sample))}
	}
	return row
}
