package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/dataset/stamp"
	"github.com/synthgen/synthgen/sink"
)

// baseJob is a job with every setting set to something other than its
// zero value, so that each change below is a real change.
func baseJob() Job {
	return Job{
		Selection: dataset.Selection{
			Path:        "rows.jsonl",
			Content:     stamp.Content{{Name: "rows.jsonl", Size: 120, XXH64: "0123456789abcdef"}},
			Format:      dataset.FormatAuto,
			PromptField: "question",
			IDField:     "uid",
			Limit:       100,
			Shard:       dataset.Shard{Index: 0, Count: 2},
		},
		Prompt: Prompting{SystemPrompt: "Be brief."},
		Sampling: Sampling{
			Model:       "m1",
			MaxTokens:   512,
			Temperature: 0.6,
			TopP:        0.95,
			Extra:       map[string]any{"top_k": 20, "chat_template_kwargs": map[string]any{"enable_thinking": false}},
			Samples:     2,
		},
	}
}

// answerChanges are, per setting key, an edit of that setting alone. Every
// tagged setting of Job must be here (TestJobSettingsAllCovered).
var answerChanges = map[string]func(j *Job){
	"endpoint.model":              func(j *Job) { j.Sampling.Model = "m2" },
	"generation.max_tokens":       func(j *Job) { j.Sampling.MaxTokens = 1024 },
	"generation.temperature":      func(j *Job) { j.Sampling.Temperature = 0.9 },
	"generation.top_p":            func(j *Job) { j.Sampling.TopP = 1 },
	"generation.n":                func(j *Job) { j.Sampling.Samples = 3 },
	"generation.system_prompt":    func(j *Job) { j.Prompt.SystemPrompt = "" },
	"generation.turns":            func(j *Job) { j.Prompt.Turns = TurnsAll },
	"generation.on_length":        func(j *Job) { j.Sampling.OnLength = LengthRetry },
	"generation.return_token_ids": func(j *Job) { j.Sampling.ReturnTokenIDs = true },
	"generation.logprobs":         func(j *Job) { j.Sampling.Logprobs = 5 },
	"generation.tool_choice":      func(j *Job) { j.Sampling.ToolChoice = "required" },
	"generation.extra_body":       func(j *Job) { j.Sampling.Extra["top_k"] = 40 },
	"dataset.format":              func(j *Job) { j.Selection.Format = dataset.FormatPrompt },
	"dataset.prompt_field":        func(j *Job) { j.Selection.PromptField = "input" },
	"dataset.id_field":            func(j *Job) { j.Selection.IDField = "" },
	"dataset.params_field":        func(j *Job) { j.Selection.ParamsField = "sampling" },
	"dataset.content":             func(j *Job) { j.Selection.Content[0].XXH64 = "fedcba9876543210" },
	"dataset.revision":            func(j *Job) { j.Selection.Revision = "hf://o/n@abc" },
	"dataset.shard_by":            func(j *Job) { j.Selection.ShardBy = dataset.ShardFiles },
	"dataset.files":               func(j *Job) { j.Selection.Files = stamp.Listing{{Name: "a.jsonl", Size: 120}} },
	"prompt.messages":             func(j *Job) { j.Prompt.Template = qaTemplate() },
	"dataset.output": func(j *Job) {
		j.Selection.Output = stamp.Output{JobHash: "h", Samples: 1, Parts: []stamp.Part{{Name: "part-000000.jsonl", Records: 2, Size: 9, XXH64: "00"}}}
	},
}

// partChanges are the settings a resume compares but the hash leaves out.
var partChanges = map[string]func(j *Job){
	"shard": func(j *Job) { j.Selection.Shard = dataset.Shard{Index: 1, Count: 2} },
	"dataset.shard_content": func(j *Job) {
		j.Selection.ShardContent = stamp.Content{{Name: "a.jsonl", Size: 120, XXH64: "0123456789abcdef"}}
	},
}

// cloneJob deep-copies the parts of a job the edits touch.
func cloneJob(j Job) Job {
	j.Selection.Content = slices.Clone(j.Selection.Content)
	j.Prompt.Template = slices.Clone(j.Prompt.Template)
	j.Sampling.Extra = maps.Clone(j.Sampling.Extra)
	return j
}

// TestNewSelectionSettingsKeepOldHashes: a job that does not split by file
// (every directory made before dataset.shard_by) hashes as it did, and the
// stamps' fields a resume trusts them by are no part of the hash: a file
// touched, moved or recounted is the same dataset.
func TestNewSelectionSettingsKeepOldHashes(t *testing.T) {
	j := baseJob()
	// baseJob's hash before the settings of sharding by file existed.
	const old = "d5b7b8111e1baca7ab96f96807418e60ccc18dbe7ac06d3063e5bbe2a013efd2"
	if h := j.Hash(); h != old {
		t.Errorf("hash %s, was %s: directories made before would be refused", h, old)
	}
	j.Selection.Content[0].Path, j.Selection.Content[0].Rows, j.Selection.Content[0].Inode = "/data/rows.jsonl", 7, 42
	if j.Hash() != old {
		t.Error("a stamp's path, rows or inode changed the job's hash")
	}
}

func TestJobSettingsAllCovered(t *testing.T) {
	var keys []string
	for _, s := range baseJob().settings() {
		keys = append(keys, s.key)
	}
	want := slices.Sorted(maps.Keys(answerChanges))
	want = append(want, slices.Sorted(maps.Keys(partChanges))...)
	slices.Sort(want)
	if !slices.Equal(keys, want) {
		t.Errorf("settings() keys %v, tests cover %v: a new setting needs its case here", keys, want)
	}
}

// TestJobHashChangesWithEveryAnswerSetting: a directory made with other
// answer settings must never resume silently.
func TestJobHashChangesWithEveryAnswerSetting(t *testing.T) {
	base := baseJob()
	h := base.Hash()
	seen := map[string]string{h: "base"}
	for key, edit := range answerChanges {
		j := cloneJob(base)
		edit(&j)
		got := j.Hash()
		if got == h {
			t.Errorf("%s changed, hash did not", key)
		}
		if other, dup := seen[got]; dup {
			t.Errorf("%s and %s changes give one hash", key, other)
		}
		seen[got] = key
		d := j.Diff(base)
		if len(d) != 1 || d[0].Key != key {
			t.Errorf("%s changed: Diff = %+v, want exactly that key", key, d)
		}
	}
}

// TestJobHashOfOlderJobsKept: the hashes of jobs made before the settings
// tagged zero existed are what they were (pinned from the code before
// them), so a resume of such a directory with the new code finds one job,
// not a mix; the settings set change the hash.
func TestJobHashOfOlderJobsKept(t *testing.T) {
	if h, want := baseJob().Hash(), "d5b7b8111e1baca7ab96f96807418e60ccc18dbe7ac06d3063e5bbe2a013efd2"; h != want {
		t.Errorf("hash of the base job %s, want %s as before generation.return_token_ids and generation.logprobs", h, want)
	}
	if h, want := (Job{}).Hash(), "27e51e2a0cc1f2f6f73c9cf18509cadc6d0f213ee0583752fc85c52dd7129316"; h != want {
		t.Errorf("hash of the zero job %s, want %s", h, want)
	}
	j := baseJob()
	j.Sampling.ReturnTokenIDs = true
	k := cloneJob(j)
	k.Sampling.Logprobs = 20
	if j.Hash() == baseJob().Hash() || k.Hash() == j.Hash() {
		t.Error("return_token_ids or logprobs set left the hash alone")
	}
	if d := baseJob().Diff(k); len(d) != 2 || d[0].Key != "generation.logprobs" || d[0].Old != "20" || d[0].New != "0" {
		t.Errorf("Diff = %+v, want logprobs 20 -> 0 and return_token_ids", d)
	}
}

// TestJobHashIgnoresWhatDoesNotChangeAnswers: the limit (growing it asks
// only new rows), the path (the same bytes elsewhere) and the shard (the
// shards of one job combine) leave the hash alone.
func TestJobHashIgnoresWhatDoesNotChangeAnswers(t *testing.T) {
	base := baseJob()
	edits := map[string]func(j *Job){
		"limit":        func(j *Job) { j.Selection.Limit = 0 },
		"limit grown":  func(j *Job) { j.Selection.Limit = 1 << 40 },
		"path":         func(j *Job) { j.Selection.Path = "/abs/elsewhere/renamed.jsonl" },
		"content name": func(j *Job) { j.Selection.Content[0].Name = "renamed.jsonl" },
		"shard":        partChanges["shard"],
		"whole":        func(j *Job) { j.Selection.Shard = dataset.Shard{} },
		"extra empty vs nil": func(j *Job) {
			j.Sampling.Extra = nil
		},
	}
	for name, edit := range edits {
		j := cloneJob(base)
		edit(&j)
		if name == "extra empty vs nil" {
			// nil and {} must agree with each other, not with base.
			k := cloneJob(base)
			k.Sampling.Extra = map[string]any{}
			if j.Hash() != k.Hash() {
				t.Errorf("extra_body nil and {} hash differently")
			}
			continue
		}
		if j.Hash() != base.Hash() {
			t.Errorf("%s changed the hash", name)
		}
	}
	// The shard is not hashed, but a resume compares it.
	j := cloneJob(base)
	partChanges["shard"](&j)
	want := []Change{{Key: "shard", Old: "0/2", New: "1/2"}}
	if d := j.Diff(base); !reflect.DeepEqual(d, want) {
		t.Errorf("shard changed: Diff = %+v, want %+v", d, want)
	}
	j.Selection.Shard = dataset.Shard{}
	want = []Change{{Key: "shard", Old: "0/2", New: "all"}}
	if d := j.Diff(base); !reflect.DeepEqual(d, want) {
		t.Errorf("whole dataset: Diff = %+v, want %+v", d, want)
	}
}

// TestJobTemperatureZero: temperature 0 is a real value (greedy), sent as
// is; it differs from any other temperature and survives the manifest.
func TestJobTemperatureZero(t *testing.T) {
	zero := baseJob()
	zero.Sampling.Temperature = 0
	warm := baseJob()
	if zero.Hash() == warm.Hash() {
		t.Error("temperature 0 and 0.6 hash the same")
	}
	b, err := json.Marshal(zero)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(b), `"temperature":0`) {
		t.Errorf("a job with temperature 0 stores %s: the 0 must be written, not omitted", b)
	}
	d := warm.Diff(zero)
	want := []Change{{Key: "generation.temperature", Old: "0", New: "0.6"}}
	if !reflect.DeepEqual(d, want) {
		t.Errorf("Diff = %+v, want %+v", d, want)
	}
}

func TestJobHashStableAcrossMapOrder(t *testing.T) {
	keys := []string{"top_k", "min_p", "repetition_penalty", "seed", "chat_template_kwargs", "a", "z"}
	vals := map[string]any{
		"top_k": 20, "min_p": 0.05, "repetition_penalty": 1.1, "seed": 7,
		"chat_template_kwargs": map[string]any{"enable_thinking": false, "b": 1, "a": "x"},
		"a":                    "first", "z": []any{1, "two", 3.5},
	}
	var first string
	for rot := range keys {
		// Insert in a rotated order, nested map included.
		extra := map[string]any{}
		for i := range keys {
			k := keys[(i+rot)%len(keys)]
			v := vals[k]
			if m, ok := v.(map[string]any); ok {
				inner := map[string]any{}
				ik := slices.Sorted(maps.Keys(m))
				if rot%2 == 1 {
					slices.Reverse(ik)
				}
				for _, x := range ik {
					inner[x] = m[x]
				}
				v = inner
			}
			extra[k] = v
		}
		j := baseJob()
		j.Sampling.Extra = extra
		for range 5 { // map iteration order is random on each call
			h := j.Hash()
			if first == "" {
				first = h
			}
			if h != first {
				t.Fatalf("rotation %d: hash %s, first %s", rot, h, first)
			}
		}
	}
}

func TestJobDiffNamesOldAndNew(t *testing.T) {
	old := baseJob()
	old.Sampling.Temperature = 0.6
	cur := cloneJob(old)
	cur.Sampling.Temperature = 0.9
	cur.Selection.Content = stamp.Content{{Name: "rows.jsonl", Size: 121, XXH64: "1111111111111111"}}
	d := cur.Diff(old)
	if len(d) != 2 {
		t.Fatalf("Diff = %+v, want dataset.content and generation.temperature", d)
	}
	if d[0].Key != "dataset.content" || !strings.Contains(d[0].Old, "rows.jsonl") || !strings.Contains(d[0].Old, "120 bytes") ||
		!strings.Contains(d[0].New, "121 bytes") {
		t.Errorf("content change shown as %+v: want the file names and sizes on both sides", d[0])
	}
	if d[1] != (Change{Key: "generation.temperature", Old: "0.6", New: "0.9"}) {
		t.Errorf("temperature change shown as %+v", d[1])
	}
	if d := old.Diff(old); len(d) != 0 {
		t.Errorf("a job differs from itself: %+v", d)
	}
	msg := (&MismatchError{Dir: "out", Changes: cur.Diff(old)}).Error()
	for _, s := range []string{"out", "generation.temperature: 0.6 (on disk) -> 0.9 (now)", "dataset.content"} {
		if !strings.Contains(msg, s) {
			t.Errorf("MismatchError %q does not say %q", msg, s)
		}
	}
}

// TestJobJSONRoundTrip: the manifest stores the job as JSON; the job read
// back must be the same job (same hash, no Diff), or a resume of an
// unchanged config is refused.
func TestJobJSONRoundTrip(t *testing.T) {
	jobs := map[string]Job{
		"base": baseJob(),
		"zero": {},
		"hub": {Selection: dataset.Selection{Path: "hf://o/n", Revision: "hf://o/n@0123456789abcdef0123456789abcdef01234567"},
			Sampling: Sampling{Model: "m", Temperature: 0}},
		"small numbers in extra_body": {Sampling: Sampling{Model: "m", Extra: map[string]any{
			"seed": json.Number("42"), "min_p": json.Number("0.05"), "top_k": 20,
		}}},
	}
	for name, j := range jobs {
		t.Run(name, func(t *testing.T) {
			back := roundTrip(t, j)
			if back.Hash() != j.Hash() {
				t.Errorf("hash %s after the round trip, %s before", back.Hash(), j.Hash())
			}
			if d := j.Diff(back); len(d) != 0 {
				t.Errorf("round trip changed %+v", d)
			}
		})
	}
}

// TestJobResumeExactNumbers: the config keeps extra_body's numbers as
// written (json.Number, so that a seed keeps every digit; YAML gives int64);
// a resume with the very config that made the directory must be accepted.
func TestJobResumeExactNumbers(t *testing.T) {
	cases := map[string]any{
		"seed above 2^53 (json)": json.Number("9007199254740993"),
		"seed above 2^53 (yaml)": int64(9007199254740993),
		"float written 1.0":      json.Number("1.0"),
		"exponent":               json.Number("1e3"),
	}
	for name, n := range cases {
		t.Run(name, func(t *testing.T) {
			j := Job{Sampling: Sampling{Model: "m", Extra: map[string]any{"x": n}}}
			sj, err := j.ManifestEntry("test", nil)
			if err != nil {
				t.Fatal(err)
			}
			dir := t.TempDir()
			_, err = j.Check(dir, false)(&sink.Manifest{JobHash: sj.Hash, Job: sj.Spec})
			if err != nil {
				t.Errorf("the same job is refused: %v", err)
			}
		})
	}
}

func roundTrip(t *testing.T, j Job) Job {
	t.Helper()
	sj, err := j.ManifestEntry("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if sj.Hash != j.Hash() {
		t.Errorf("sink job hash %s, job %s", sj.Hash, j.Hash())
	}
	back, err := ManifestJob(t.TempDir(), sj.Spec, nil)
	if err != nil {
		t.Fatalf("ManifestJob(%s): %v", sj.Spec, err)
	}
	return back
}

// TestLegacyJobKeysRoundTrip: a version 1 directory is checked by building
// version 1's setting map from the current job; that only works if a job
// rebuilt from such a map gives the map back.
func TestLegacyJobKeysRoundTrip(t *testing.T) {
	m, err := sink.ReadManifest(filepath.Join("..", "cmd", "synthgen", "testdata", "v1dir", "out-jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	real := m.Identity.Answer
	with := func(k, v string) map[string]string {
		a := maps.Clone(real)
		a[k] = v
		return a
	}
	cases := map[string]map[string]string{
		"real v1 manifest": real,
		"extra_body":       with("generation.extra_body", `{"chat_template_kwargs":{"enable_thinking":false},"top_k":20}`),
		"hub dataset":      with("dataset.identity", "hf://o/n@0123456789abcdef0123456789abcdef01234567"),
		"temperature 0":    with("generation.temperature", "0"),
		"system prompt":    with("generation.system_prompt", "Be brief."),
		"id field":         with("dataset.id_field", "uid"),
		// Version 1 wrote extra_body with encoding/json, which escapes <, > and &.
		"extra_body html":      with("generation.extra_body", `{"stop":["\u003c/s\u003e","a\u0026b"]}`),
		"extra_body big seed":  with("generation.extra_body", `{"seed":9007199254740993}`),
		"extra_body float 1.0": with("generation.extra_body", `{"repetition_penalty":1.0}`),
	}
	// Version 1's config kept extra_body's numbers as written (json.Number)
	// and hashed them so; legacyJob must read them back the same way.
	for name, a := range cases {
		t.Run(name, func(t *testing.T) {
			j, err := legacyJob(t.TempDir(), a)
			if err != nil {
				t.Fatal(err)
			}
			got := j.legacyKeys()
			if d := diffLegacy(a, got); len(d) != 0 {
				t.Errorf("rebuilt job gives back %+v", d)
			}
		})
	}
}

// TestTurnsDefault: a job written before generation.turns existed (no
// value) and a job asking for the first turn are one job.
func TestTurnsDefault(t *testing.T) {
	a, b := baseJob(), baseJob()
	a.Prompt.Turns, b.Prompt.Turns = "", TurnsFirst
	if a.Hash() != b.Hash() || len(a.Diff(b)) != 0 {
		t.Errorf("turns \"\" and \"first\" differ: %+v", a.Diff(b))
	}
	b.Prompt.Turns = TurnsAll
	if d := b.Diff(a); len(d) != 1 || d[0].Key != "generation.turns" || d[0].Old != "first" || d[0].New != "all" {
		t.Errorf("Diff = %+v, want generation.turns first -> all", d)
	}
}

// qaTemplate is a two-turn prompt.messages.
func qaTemplate() []chat.Message {
	return []chat.Message{{Role: "system", Content: "Answer in {{.lang}}."}, {Role: "user", Content: "{{.question}}"}}
}

// TestJobTemplateLeavesOlderHashes: a job without a template (and without
// a first pass for dataset) hashes as jobs made before prompt.messages and
// dataset.output existed, so their directories keep one job; any template
// changes the hash, and a resume with another template is refused naming
// the key.
func TestJobTemplateLeavesOlderHashes(t *testing.T) {
	j := baseJob()
	// Pinned from the code before prompt.messages existed.
	if got, want := j.Hash(), "d5b7b8111e1baca7ab96f96807418e60ccc18dbe7ac06d3063e5bbe2a013efd2"; got != want {
		t.Errorf("hash %s without a template, want %s: the hash before prompt.messages", got, want)
	}
	withOne := cloneJob(baseJob())
	withOne.Prompt.Template = qaTemplate()
	if withOne.Hash() == j.Hash() {
		t.Error("a template does not change the hash")
	}
	d := withOne.Diff(j)
	if len(d) != 1 || d[0].Key != "prompt.messages" || d[0].Old != "(none)" || !strings.Contains(d[0].New, "{{.question}}") {
		t.Errorf("Diff %+v: want prompt.messages from (none) to the turns", d)
	}
	back := roundTrip(t, withOne)
	if !reflect.DeepEqual(back.Prompt.Template, withOne.Prompt.Template) {
		t.Errorf("manifest round trip: %+v", back.Prompt.Template)
	}
	sj, err := j.ManifestEntry("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = withOne.Check("out", false)(&sink.Manifest{JobHash: sj.Hash, Job: sj.Spec})
	var me *MismatchError
	if !errors.As(err, &me) || !strings.Contains(err.Error(), "prompt.messages: (none) (on disk) -> ") {
		t.Errorf("resume with a template over a directory without: %v", err)
	}
}

// TestJobOutputChangeSaysWhat: a first pass that grew since the job
// started is refused with the part that is new.
func TestJobOutputChangeSaysWhat(t *testing.T) {
	part := func(name string, n int) stamp.Part {
		return stamp.Part{Name: name, Records: n, Size: int64(10 * n), XXH64: fmt.Sprintf("%016x", n)}
	}
	old := Job{Selection: dataset.Selection{Path: "first", Output: stamp.Output{JobHash: "abc", Samples: 1, Parts: []stamp.Part{part("part-000000.jsonl", 5)}}}}
	now := old
	now.Selection.Output.Parts = append(slices.Clone(old.Selection.Output.Parts), part("part-000001.jsonl", 3))
	sj, err := old.ManifestEntry("test", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = now.Check("out", false)(&sink.Manifest{JobHash: sj.Hash, Job: sj.Spec})
	for _, w := range []string{
		"dataset.output: job abc, 1 parts, 5 records (on disk) -> job abc, 2 parts, 8 records (now): data/part-000001.jsonl is new (3 records)",
		"the output directory this job reads (dataset.path, a first pass) is not what it was when this job started",
	} {
		if err == nil || !strings.Contains(err.Error(), w) {
			t.Errorf("error %v\nwant %q", err, w)
		}
	}
}

// TestMismatchNamesTheShard: a resume with only the shard count changed
// (1/4 -> 1/5; by files, the shard's own files change with it) is told
// that the shard differs and what to run, not that the dataset's files
// were edited; a changed file of the same shard still is. Where a new
// value came from is said when the caller knows it.
func TestMismatchNamesTheShard(t *testing.T) {
	old := baseJob()
	old.Selection.ShardBy = dataset.ShardFiles
	old.Selection.Shard = dataset.Shard{Index: 1, Count: 4}
	old.Selection.ShardContent = stamp.Content{{Name: "b.jsonl", Size: 120, XXH64: "0123456789abcdef"}}
	cur := cloneJob(old)
	cur.Selection.Shard = dataset.Shard{Index: 1, Count: 5}
	cur.Selection.ShardContent = stamp.Content{{Name: "c.jsonl", Size: 99, XXH64: "fedcba9876543210"}}
	msg := (&MismatchError{Dir: "out", Changes: cur.Diff(old), From: map[string]string{"shard": "flag --shard"}}).Error()
	for _, s := range []string{"shard: 1/4 (on disk) -> 1/5 (now) from flag --shard", "holds shard 1/4 and this run asks for shard 1/5", "--shard 1/4 here"} {
		if !strings.Contains(msg, s) {
			t.Errorf("MismatchError %q does not say %q", msg, s)
		}
	}
	if strings.Contains(msg, "edited, reordered") {
		t.Errorf("MismatchError for a new shard count says the files were edited: %q", msg)
	}

	edited := cloneJob(old)
	edited.Selection.ShardContent = stamp.Content{{Name: "b.jsonl", Size: 121, XXH64: "fedcba9876543210"}}
	if msg := (&MismatchError{Dir: "out", Changes: edited.Diff(old)}).Error(); !strings.Contains(msg, "edited, reordered") {
		t.Errorf("MismatchError for an edited file of the same shard does not say so: %q", msg)
	}
}
