package job

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// This file is the job's side of the output directory's manifest: the sink
// stores the job as opaque JSON and asks Check whether a run may resume the
// directory; what a job is and when two differ is decided here.

// ManifestEntry is j as the sink stores it.
func (j Job) ManifestEntry(version string, config map[string]any) (sink.JobRecord, error) {
	spec, err := json.Marshal(j)
	if err != nil {
		return sink.JobRecord{}, fmt.Errorf("encode job: %w", err)
	}
	return sink.JobRecord{Spec: spec, Hash: j.Hash(), Version: version, Config: config, Limit: j.Selection.Limit}, nil
}

// ManifestJob is the job a manifest records: decoded from version 2's typed
// job, or rebuilt from version 1's setting strings (which had neither the
// shard, taken then from the directory's report.json, nor the dataset's
// content).
func ManifestJob(dir string, spec json.RawMessage, legacy *sink.LegacyIdentity) (Job, error) {
	if len(spec) > 0 {
		var j Job
		if err := decodeExact(spec, &j); err != nil {
			return Job{}, fmt.Errorf("%s: job: %w", filepath.Join(dir, sink.ManifestName), err)
		}
		return j, nil
	}
	if legacy == nil {
		return Job{}, fmt.Errorf("%s: holds no job", filepath.Join(dir, sink.ManifestName))
	}
	return legacyJob(dir, legacy.Answer)
}

// decodeExact decodes JSON keeping numbers as written (json.Number), as
// the config does: extra_body's seed above 2^53 or its 1.0 must read back
// as the job that wrote it, or the same config would be refused.
func decodeExact(data []byte, v any) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	return dec.Decode(v)
}

// legacyKeys are version 1's answer settings, built from a job so that a
// directory it wrote is compared the way it was then.
func (j Job) legacyKeys() map[string]string {
	f := func(v float64) string { return strconv.FormatFloat(v, 'g', -1, 64) }
	extra, _ := canonical(reflect.ValueOf(j.Sampling.Extra))
	keys := map[string]string{
		"endpoint.model":           j.Sampling.Model,
		"generation.max_tokens":    strconv.Itoa(j.Sampling.MaxTokens),
		"generation.temperature":   f(j.Sampling.Temperature),
		"generation.top_p":         f(j.Sampling.TopP),
		"generation.n":             strconv.Itoa(j.Sampling.Samples),
		"generation.system_prompt": j.Prompt.SystemPrompt,
		"generation.extra_body":    extra,
		"dataset.path":             j.Selection.Path,
		"dataset.format":           j.Selection.Format,
		"dataset.prompt_field":     j.Selection.PromptField,
		"dataset.id_field":         j.Selection.IDField,
	}
	if j.Selection.Revision != "" {
		keys["dataset.identity"] = j.Selection.Revision
	}
	return keys
}

func legacyJob(dir string, a map[string]string) (Job, error) {
	var j Job
	var errs []error
	num := func(key string, parse func(string) error) {
		if err := parse(a[key]); err != nil {
			errs = append(errs, fmt.Errorf("identity.answer.%s: %q: %w", key, a[key], err))
		}
	}
	num("generation.max_tokens", func(s string) (err error) { j.Sampling.MaxTokens, err = strconv.Atoi(s); return })
	num("generation.n", func(s string) (err error) { j.Sampling.Samples, err = strconv.Atoi(s); return })
	num("generation.temperature", func(s string) (err error) { j.Sampling.Temperature, err = strconv.ParseFloat(s, 64); return })
	num("generation.top_p", func(s string) (err error) { j.Sampling.TopP, err = strconv.ParseFloat(s, 64); return })
	if body := a["generation.extra_body"]; body != "" && body != "{}" {
		if err := decodeExact([]byte(body), &j.Sampling.Extra); err != nil {
			errs = append(errs, fmt.Errorf("identity.answer.generation.extra_body: %w", err))
		}
	}
	j.Sampling.Model = a["endpoint.model"]
	j.Prompt.SystemPrompt = a["generation.system_prompt"]
	j.Selection.Path = a["dataset.path"]
	j.Selection.Revision = a["dataset.identity"]
	j.Selection.Format = a["dataset.format"]
	j.Selection.PromptField = a["dataset.prompt_field"]
	j.Selection.IDField = a["dataset.id_field"]
	j.Selection.Shard = legacyShard(dir)
	if err := errors.Join(errs...); err != nil {
		return Job{}, fmt.Errorf("%s: %w", filepath.Join(dir, sink.ManifestName), err)
	}
	return j, nil
}

// legacyShard is the --shard a version 1 directory was made with, which
// only its report.json (written when a run ended) says; the whole dataset
// when it does not.
func legacyShard(dir string) dataset.Shard {
	data, err := os.ReadFile(layout.Dir(dir).Report())
	if err != nil {
		return dataset.Shard{}
	}
	var rep struct {
		Config struct {
			Shard string `json:"shard"`
		} `json:"config"`
	}
	if json.Unmarshal(data, &rep) != nil {
		return dataset.Shard{}
	}
	sh, _ := dataset.ParseShard(rep.Config.Shard)
	return sh
}

// MismatchError refuses to resume a directory made by another job: its
// answers and this run's would mix in one dataset.
type MismatchError struct {
	Dir     string
	Changes []Change
	// From says where a changed setting's new value came from, by key
	// ("flag --generation.temperature", "env SYNTHGEN_...", "job.yaml:7",
	// "the default"), as the caller knows it; a key not in it is shown
	// without.
	From map[string]string
}

func (e *MismatchError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "output dir %s holds answers made with other settings:", e.Dir)
	content, output := false, false
	var shard *Change
	for i, c := range e.Changes {
		fmt.Fprintf(&b, "\n  %s: %s (on disk) -> %s (now)", c.Key, c.Old, c.New)
		if from := e.From[c.Key]; from != "" {
			fmt.Fprintf(&b, " from %s", from)
		}
		if c.Detail != "" {
			fmt.Fprintf(&b, ": %s", c.Detail)
		}
		switch c.Key {
		case "shard":
			shard = &e.Changes[i]
		case "dataset.content", "dataset.files":
			content = true
		case "dataset.shard_content":
			// A shard of other files follows from another --shard; alone,
			// the files of the same shard changed.
			content = content || !e.changed("shard")
		case "dataset.output":
			output = true
		}
	}
	if output {
		b.WriteString("\nthe output directory this job reads (dataset.path, a first pass) is not what it was when this job started: " +
			"its records are this job's rows, and the ones answered would no longer be those. Restore it, or choose a new output.dir for a pass over it as it is now")
		b.WriteString("\n(--force resumes anyway: the records already made keep their keys, the rows new since are asked)")
		return b.String()
	}
	if content {
		b.WriteString("\nthe dataset's files are not the ones this directory was made from (edited, reordered or replaced): " +
			"its ids would now name other rows. Restore the files, or choose a new output.dir")
		b.WriteString("\n(--force resumes anyway: the records already made keep their ids and the old rows' answers)")
		return b.String()
	}
	if shard != nil {
		fmt.Fprintf(&b, "\nthis directory holds %s and this run asks for %s: each shard has its own output.dir. "+
			"Run with %s here, or give %s a new output.dir (a new number of shards makes other shards: start them all in new directories)",
			shardPhrase(shard.Old), shardPhrase(shard.New), shardFlag(shard.Old), shardPhrase(shard.New))
		return b.String()
	}
	b.WriteString("\nresume anyway with --force (the dataset will mix both settings), or choose a new output.dir")
	return b.String()
}

// shardPhrase names a shard as Diff shows it ("1/4", "all").
func shardPhrase(s string) string {
	if s == "all" {
		return "the whole dataset"
	}
	return "shard " + s
}

// shardFlag is how a run asks for a shard as Diff shows it.
func shardFlag(s string) string {
	if s == "all" {
		return "no --shard"
	}
	return "--shard " + s
}

// changed reports whether the setting key is among the changes.
func (e *MismatchError) changed(key string) bool {
	for _, c := range e.Changes {
		if c.Key == key {
			return true
		}
	}
	return false
}

// Check is sink.Options.Check for a run of j: a directory made by the same
// job resumes, another job's is refused (*MismatchError) unless force, in
// which case every change is accepted and recorded.
func (j Job) Check(dir string, force bool) func(*sink.Manifest) ([]string, error) {
	return func(m *sink.Manifest) ([]string, error) {
		var changes []Change
		if len(m.Job) == 0 && m.Identity != nil {
			changes = diffLegacy(m.Identity.Answer, j.legacyKeys())
			if sh := legacyShard(dir); sh != j.Selection.Shard {
				changes = append(changes, Change{Key: "shard", Old: shardText(sh), New: shardText(j.Selection.Shard)})
			}
		} else {
			old, err := ManifestJob(dir, m.Job, m.Identity)
			if err != nil {
				return nil, err
			}
			changes = j.Diff(old)
		}
		if len(changes) == 0 {
			return nil, nil
		}
		if !force {
			return nil, &MismatchError{Dir: dir, Changes: changes}
		}
		accepted := make([]string, len(changes))
		for i, c := range changes {
			accepted[i] = fmt.Sprintf("%s: %s -> %s", c.Key, c.Old, c.New)
		}
		return accepted, nil
	}
}

func shardText(s dataset.Shard) string {
	b, _ := s.MarshalText()
	return string(b)
}

const unset = "(unset)"

// diffLegacy compares version 1's setting strings as version 1 did.
func diffLegacy(old, cur map[string]string) []Change {
	var out []Change
	seen := map[string]bool{}
	add := func(k string) {
		if seen[k] {
			return
		}
		seen[k] = true
		o, okOld := old[k]
		n, okNew := cur[k]
		if okOld && okNew && o == n {
			return
		}
		if !okOld {
			o = unset
		}
		if !okNew {
			n = unset
		}
		out = append(out, Change{Key: k, Old: o, New: n})
	}
	for k := range old {
		add(k)
	}
	for k := range cur {
		add(k)
	}
	slices.SortFunc(out, func(a, b Change) int { return strings.Compare(a.Key, b.Key) })
	return out
}

// MixedJobs describes the jobs whose records a directory holds when there
// are several (forced runs wrote into another job's directory): each by
// its hash and its values of the settings that differ between them, the
// manifest's job (latest, the one a resume compares with) first, the
// others in the order of the runs that asked them. It is "" for one job.
func MixedJobs(dir, latest string, jobs map[string]json.RawMessage, runs []sink.Run) string {
	if len(jobs) < 2 {
		return ""
	}
	order := []string{latest}
	for _, r := range runs {
		if _, ok := jobs[r.JobHash]; ok && !slices.Contains(order, r.JobHash) {
			order = append(order, r.JobHash)
		}
	}
	for _, h := range slices.Sorted(maps.Keys(jobs)) {
		if !slices.Contains(order, h) {
			order = append(order, h)
		}
	}
	base, err := ManifestJob(dir, jobs[latest], nil)
	if err != nil {
		return fmt.Sprintf("the directory mixes records of %d jobs (forced runs): %s", len(jobs), strings.Join(order, ", "))
	}
	values := map[string]map[string]string{latest: {}}
	var keys []string
	for _, h := range order[1:] {
		j, err := ManifestJob(dir, jobs[h], nil)
		if err != nil {
			continue
		}
		values[h] = map[string]string{}
		for _, c := range j.Diff(base) {
			values[latest][c.Key], values[h][c.Key] = c.Old, c.New
			if !slices.Contains(keys, c.Key) {
				keys = append(keys, c.Key)
			}
		}
	}
	slices.Sort(keys)
	var parts []string
	for i, h := range order {
		v, ok := values[h]
		if !ok {
			parts = append(parts, fmt.Sprintf("%.12s (unreadable)", h))
			continue
		}
		var settings []string
		for _, k := range keys {
			val, ok := v[k]
			if !ok {
				val = values[latest][k] // the same as the manifest's job
			}
			settings = append(settings, k+" "+val)
		}
		what := fmt.Sprintf("%.12s (%s)", h, strings.Join(settings, ", "))
		if i == 0 {
			what += " is the manifest's, the latest"
		}
		parts = append(parts, what)
	}
	return fmt.Sprintf("the directory mixes records of %d jobs (forced runs wrote into it): %s; runs lists which run asked which",
		len(jobs), strings.Join(parts, "; "))
}
