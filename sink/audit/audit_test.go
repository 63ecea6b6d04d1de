package audit

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/sink"
)

// writeInspectDir writes a directory with the real sink: records from..to
// (every fifth truncated at max_tokens), part size 10, and three errors, one
// of which a later record supersedes.
func writeInspectDir(t testing.TB, dir, format string, from, to int) {
	t.Helper()
	s := mustOpen(t, testOptions(dir, format))
	errs := []*sink.ErrorRecord{
		{ID: strconv.Itoa(to + 1), Sample: 0, Status: 400, Message: "bad request", Attempts: 1, Cause: "http_400"},
		{ID: strconv.Itoa(to + 2), Sample: 0, Status: 0, Message: "deadline", Attempts: 6, Cause: "timeout"},
		{ID: strconv.Itoa(from), Sample: from % 2, Status: 503, Message: "busy", Attempts: 6, Cause: "http_503"},
	}
	for _, e := range errs {
		if err := s.WriteError(e); err != nil {
			t.Fatal(err)
		}
	}
	for i := from; i < to; i++ {
		r := testRecord(i)
		if i%5 == 0 {
			r.FinishReason = "length"
		}
		if err := s.Write(r); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestInspectClean(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			writeInspectDir(t, dir, format, 0, 25)
			r := mustAudit(t, dir)
			if !r.OK() {
				t.Fatalf("problems in a clean dir: %q", r.Problems)
			}
			var prompt, compl int64
			for i := range 25 {
				prompt += int64(12 + i)
				compl += int64(100 + i)
			}
			if r.Records != 25 || r.Distinct != 25 || len(r.Duplicates) != 0 {
				t.Errorf("records %d distinct %d duplicates %v, want 25 25 none", r.Records, r.Distinct, r.Duplicates)
			}
			if r.PromptTokens != prompt || r.CompletionTokens != compl {
				t.Errorf("tokens %d/%d, want %d/%d", r.PromptTokens, r.CompletionTokens, prompt, compl)
			}
			if want := map[string]int64{"stop": 20, "length": 5}; !maps.Equal(r.FinishReasons, want) {
				t.Errorf("finish reasons %v, want %v", r.FinishReasons, want)
			}
			if r.TruncatedShare != 0.2 {
				t.Errorf("truncated share %v, want 0.2", r.TruncatedShare)
			}
			wantErrs := ErrorSummary{Records: 3, Keys: 3, Open: 2, ByCause: map[string]int{"http_400": 1, "timeout": 1}}
			if !reflect.DeepEqual(r.Errors, wantErrs) {
				t.Errorf("errors %+v, want %+v", r.Errors, wantErrs)
			}
			var names []string
			for _, sh := range r.Parts {
				names = append(names, sh.Name)
				if !sh.Valid || sh.State != PartOK || !sh.Listed || sh.Format != format {
					t.Errorf("shard %+v: want valid, ok, listed, %s", sh, format)
				}
			}
			want := []string{"part-000000." + format, "part-000001." + format, "part-000002." + format}
			if !slices.Equal(names, want) {
				t.Errorf("shards %v, want %v", names, want)
			}
			m := r.Manifest
			if m == nil || m.Parts != 3 || m.Records != 25 || len(m.Runs) != 1 || m.Runs[0].RecordsWritten != 25 ||
				m.Runs[0].EndedAt == nil || m.JobHash != testJob.Hash {
				t.Errorf("manifest summary %+v", m)
			}
			if !has(t, r, sink.Key{ID: "7", Sample: 1}) || has(t, r, sink.Key{ID: "26", Sample: 0}) || !r.Failed(sink.Key{ID: "26", Sample: 0}) || r.Failed(sink.Key{ID: "0", Sample: 0}) {
				t.Error("Has/Failed disagree with what was written")
			}
			if len(r.Notes) != 0 {
				t.Errorf("notes in a cleanly closed dir: %q", r.Notes)
			}
		})
	}
}

// The acceptance test: a planted duplicate and a corrupt part are
// both reported, the audit is not OK, and nothing on disk changes.
func TestInspectPlanted(t *testing.T) {
	tests := []struct {
		format  string
		plant   func(t *testing.T, data string)
		dupWant string // in a problem
	}{
		{sink.FormatJSONL, func(t *testing.T, data string) {
			// A line of part 0 copied into a new part; garbage in part 1.
			lines := readLines(t, filepath.Join(data, "part-000000.jsonl"))
			putFile(t, filepath.Join(data, "part-000009.jsonl"), lines[3]+"\n")
			appendBytes(t, filepath.Join(data, "part-000001.jsonl"), "{\"id\": garbage\n")
		}, `duplicate key id="3" sample=1 in`},
		{sink.FormatParquet, func(t *testing.T, data string) {
			// Part 0 copied whole; part 1 cut in half (no footer).
			src, err := os.ReadFile(filepath.Join(data, "part-000000.parquet"))
			if err != nil {
				t.Fatal(err)
			}
			putFile(t, filepath.Join(data, "part-000009.parquet"), string(src))
			p := filepath.Join(data, "part-000001.parquet")
			st, err := os.Stat(p)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.Truncate(p, st.Size()/2); err != nil {
				t.Fatal(err)
			}
		}, `10 duplicate keys in`},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			dir := t.TempDir()
			writeInspectDir(t, dir, tt.format, 0, 25)
			data := filepath.Join(dir, "data")
			tt.plant(t, data)
			r := mustAudit(t, dir)
			if r.OK() {
				t.Fatal("OK() with a duplicate and a corrupt shard")
			}
			all := strings.Join(r.Problems, "\n")
			if !strings.Contains(all, tt.dupWant) || !strings.Contains(all, "part-000009."+tt.format) {
				t.Errorf("problems do not name the duplicate: %s", all)
			}
			corrupt := filepath.Join(data, "part-000001."+tt.format)
			if !strings.Contains(all, corrupt+" is corrupt") || !strings.Contains(all, "move it away") {
				t.Errorf("problems do not name the corrupt shard %s: %s", corrupt, all)
			}
			if got := r.InvalidParts(); !slices.Equal(got, []string{"part-000001." + tt.format}) {
				t.Errorf("invalid shards %v", got)
			}
			if len(r.Duplicates) == 0 || len(r.Duplicates[0].Files) != 2 {
				t.Errorf("duplicates %+v, want each with its two files", r.Duplicates)
			}
			// The corrupt part's records are not counted: moving it away
			// makes them pending again.
			if has(t, r, sink.Key{ID: "15", Sample: 1}) {
				t.Error("a key of the corrupt shard counts as done")
			}
		})
	}
}

func TestInspectCorruptLines(t *testing.T) {
	rec := `{"id":"1","sample":0,"finish_reason":"stop"}`
	tests := []struct {
		name, content, want string
	}{
		{"not json", rec + "\nhello\n", "part-000000.jsonl:2:"},
		{"empty id", rec + "\n{\"id\":\"\",\"sample\":0}\n", "part-000000.jsonl:2: id: missing or empty"},
		{"negative sample", "{\"id\":\"a\",\"sample\":-1}\n", "part-000000.jsonl:1: sample: -1 is negative"},
		{"bad time", `{"id":"a","sample":0,"created_at":"yesterday"}` + "\n", "part-000000.jsonl:1:"},
		{"torn last line", rec + "\n" + `{"id":"2"`, "part-000000.jsonl:2: last line is incomplete"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			putFile(t, filepath.Join(dir, "data", "part-000000.jsonl"), tt.content)
			r := mustAudit(t, dir)
			if len(r.Parts) != 1 || r.Parts[0].Valid || !strings.Contains(r.Parts[0].Problem, tt.want) {
				t.Fatalf("shard %+v, want invalid naming %q", r.Parts, tt.want)
			}
			if !strings.Contains(strings.Join(r.Problems, "\n"), "manifest.json is missing") {
				t.Errorf("no manifest problem: %q", r.Problems)
			}
		})
	}
}

// A run that was killed (or is still running) leaves temporaries: they are
// read up to the last complete line and reported as open, not as problems.
func TestInspectOpenParts(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			s := mustOpen(t, testOptions(dir, format))
			writeRange(t, s, 0, 14)
			dir, tmp := crashed(t, s, dir)
			appendBytes(t, tmp, `{"id":"99","sample":1,"conte`) // torn mid-write
			r := mustAudit(t, dir)
			if !r.OK() {
				t.Fatalf("problems: %q", r.Problems)
			}
			if r.Records != 14 || r.Distinct != 14 || has(t, r, sink.Key{ID: "99", Sample: 1}) {
				t.Errorf("records %d distinct %d: want 14, torn line unread", r.Records, r.Distinct)
			}
			last := r.Parts[len(r.Parts)-1]
			if last.Name != filepath.Base(tmp) || last.State != PartOpen || last.Records != 4 || !last.Valid {
				t.Errorf("open shard %+v", last)
			}
			if !strings.Contains(strings.Join(r.Notes, "\n"), "run 1 has not ended") {
				t.Errorf("notes %q do not say the run has not ended", r.Notes)
			}
		})
	}
}

func TestInspectOpenPartCorrupt(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, sink.FormatJSONL))
	writeRange(t, s, 0, 3)
	dir, tmp := crashed(t, s, dir)
	appendBytes(t, tmp, "not json\n")
	r := mustAudit(t, dir)
	if r.OK() || !strings.Contains(strings.Join(r.Problems, "\n"), "part-000000.jsonl.open:4:") {
		t.Errorf("problems %q: want the .open shard's line 4", r.Problems)
	}
}

// Between a Parquet part's rename and its journal's removal both exist:
// the journal's rows are the final file's, not duplicates.
func TestInspectJournalOfFinal(t *testing.T) {
	dir := t.TempDir()
	writeInspectDir(t, dir, sink.FormatParquet, 0, 10)
	data := filepath.Join(dir, "data")
	var lines strings.Builder
	for i := range 10 {
		fmt.Fprintf(&lines, `{"id":"%d","sample":%d}`+"\n", i, i%2)
	}
	putFile(t, filepath.Join(data, "part-000000.parquet.journal"), lines.String())
	putFile(t, filepath.Join(data, "part-000001.parquet.tmp"), "PAR1 half")
	r := mustAudit(t, dir)
	if !r.OK() || r.Records != 10 {
		t.Fatalf("records %d problems %q", r.Records, r.Problems)
	}
	states := map[string]string{}
	for _, sh := range r.Parts {
		states[sh.Name] = sh.State
	}
	want := map[string]string{"part-000000.parquet": PartOK, "part-000000.parquet.journal": PartLeftover, "part-000001.parquet.tmp": PartLeftover}
	if !maps.Equal(states, want) {
		t.Errorf("states %v, want %v", states, want)
	}
}

func TestInspectManifestMismatch(t *testing.T) {
	dir := t.TempDir()
	writeInspectDir(t, dir, sink.FormatJSONL, 0, 25)
	data := filepath.Join(dir, "data")
	if err := os.Remove(filepath.Join(data, "part-000002.jsonl")); err != nil {
		t.Fatal(err)
	}
	lines := readLines(t, filepath.Join(data, "part-000001.jsonl"))
	putFile(t, filepath.Join(data, "part-000001.jsonl"), strings.Join(lines[:7], "\n")+"\n")
	putFile(t, filepath.Join(data, "part-000003.jsonl"), `{"id":"500","sample":0}`+"\n")
	r := mustAudit(t, dir)
	all := strings.Join(r.Problems, "\n")
	for _, want := range []string{
		"part-000002.jsonl is listed in the manifest (5 records) but missing",
		"part-000001.jsonl holds 7 records, the manifest says 10",
	} {
		if !strings.Contains(all, want) {
			t.Errorf("problems lack %q:\n%s", want, all)
		}
	}
	if !strings.Contains(strings.Join(r.Notes, "\n"), "part-000003.jsonl (1 records) is not in the manifest") {
		t.Errorf("notes %q lack the unlisted shard", r.Notes)
	}
}

func TestInspectNotOutputDir(t *testing.T) {
	dir := t.TempDir()
	if _, err := Dir(dir); err == nil || !strings.Contains(err.Error(), "not a synthgen output directory") {
		t.Errorf("empty dir: err = %v", err)
	}
	if _, err := Dir(filepath.Join(dir, "nope")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("missing dir: err = %v", err)
	}
}

// Two --shard directories read as one dataset: totals add up, and a key in
// both is a duplicate of the combined dataset though each dir is fine.
func TestCombine(t *testing.T) {
	a, b := t.TempDir(), t.TempDir()
	writeInspectDir(t, a, sink.FormatJSONL, 0, 20)
	writeInspectDir(t, b, sink.FormatParquet, 20, 35)
	ra, rb := mustAudit(t, a), mustAudit(t, b)
	c, err := Combine(ra, rb)
	if err != nil {
		t.Fatal(err)
	}
	if !c.OK() || c.Records != 35 || c.Distinct != 35 || c.PromptTokens != ra.PromptTokens+rb.PromptTokens {
		t.Errorf("combined: ok %v records %d distinct %d problems %q", c.OK(), c.Records, c.Distinct, c.Problems)
	}
	// b's error for key 20/0 is superseded by b's own record, and a's for
	// 22/0 by b's record too: a key failed in one dir and done in another is
	// done. 21/0 (record 21 is sample 1), 36/0 and 37/0 stay failed.
	if c.Errors.Open != 3 || c.Failed(sink.Key{ID: "22", Sample: 0}) || !c.Failed(sink.Key{ID: "21", Sample: 0}) || !c.Failed(sink.Key{ID: "37", Sample: 0}) {
		t.Errorf("combined errors %+v", c.Errors)
	}

	// Plant a's part 0 line into b.
	line := readLines(t, filepath.Join(a, "data", "part-000000.jsonl"))[4]
	putFile(t, filepath.Join(b, "data", "part-000007.jsonl"), line+"\n")
	rb = mustAudit(t, b)
	if !rb.OK() {
		t.Fatalf("b alone: %q", rb.Problems)
	}
	c, err = Combine(ra, rb)
	if err != nil {
		t.Fatal(err)
	}
	if c.OK() || len(c.Duplicates) != 1 || !strings.Contains(c.Problems[0], `id="4" sample=0`) ||
		!strings.Contains(c.Problems[0], a) || !strings.Contains(c.Problems[0], b) {
		t.Errorf("cross-dir duplicate: problems %q duplicates %+v", c.Problems, c.Duplicates)
	}

	other := t.TempDir()
	opts := testOptions(other, sink.FormatJSONL)
	opts.Job.Hash = "other"
	s := mustOpen(t, opts)
	writeRange(t, s, 0, 1)
	_ = s.Close()
	if _, err := Combine(ra, mustAudit(t, other)); !errors.Is(err, ErrIdentityDiffers) {
		t.Errorf("different identities: err = %v", err)
	}
}

// FuzzInspectJSONL: whatever bytes a JSONL part holds, the audit does not
// panic, changes nothing, counts only complete valid lines, and an invalid
// part's problem names the file and a line.
func FuzzInspectJSONL(f *testing.F) {
	f.Add([]byte(`{"id":"1","sample":0,"finish_reason":"stop","completion_tokens":3}` + "\n"))
	f.Add([]byte("{}\n"))
	f.Add([]byte("\n\n"))
	f.Add([]byte(`{"id":"1","sample":0}` + "\n" + `{"id":"1","sample":0}` + "\n"))
	f.Add([]byte(`{"id":"x","sample":1,"messages":[{"role":"user","content":3}]}` + "\n"))
	f.Add([]byte(`{"id":"x"`))
	f.Fuzz(func(t *testing.T, content []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "data", "part-000000.jsonl")
		putFile(t, path, string(content))
		r, err := Dir(dir)
		if err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if !bytes.Equal(got, content) {
			t.Fatal("the audit changed the shard")
		}
		sh := r.Parts[0]
		if r.Records > int64(bytes.Count(content, []byte{'\n'})) {
			t.Fatalf("%d records from %d lines", r.Records, bytes.Count(content, []byte{'\n'}))
		}
		if !sh.Valid && !strings.Contains(sh.Problem, "part-000000.jsonl:") {
			t.Fatalf("problem does not name file:line: %q", sh.Problem)
		}
		if sh.Valid && r.Distinct+int64(len(r.Duplicates)) < 1 && r.Records > 0 {
			t.Fatalf("records %d but no keys", r.Records)
		}
	})
}

// FuzzInspectParquet: a Parquet part cut or overwritten anywhere is
// reported as invalid (naming the file), never a panic.
func FuzzInspectParquet(f *testing.F) {
	src := f.TempDir()
	s := mustOpen(f, testOptions(src, sink.FormatParquet))
	writeRange(f, s, 0, 5)
	if err := s.Close(); err != nil {
		f.Fatal(err)
	}
	good, err := os.ReadFile(filepath.Join(src, "data", "part-000000.parquet"))
	if err != nil {
		f.Fatal(err)
	}
	f.Add(uint32(0), uint32(0), byte(0))
	f.Add(uint32(len(good)/2), uint32(0), byte(0))
	f.Add(uint32(len(good)), uint32(100), byte(0xff))
	f.Add(uint32(len(good)), uint32(len(good)-20), byte(7))
	f.Fuzz(func(t *testing.T, cut, at uint32, b byte) {
		content := slices.Clone(good[:min(int(cut), len(good))])
		if int(at) < len(content) {
			content[at] ^= b
		}
		dir := t.TempDir()
		putFile(t, filepath.Join(dir, "data", "part-000000.parquet"), string(content))
		r, err := Dir(dir)
		if err != nil {
			t.Fatal(err)
		}
		sh := r.Parts[0]
		if sh.Valid && (sh.Records != 5 || r.Distinct != 5) {
			t.Fatalf("valid shard with %d records, %d keys", sh.Records, r.Distinct)
		}
		if !sh.Valid && !strings.Contains(strings.Join(r.Problems, "\n"), "part-000000.parquet is corrupt") {
			t.Fatalf("problems do not name the shard: %q", r.Problems)
		}
	})
}

// BenchmarkInspect reads a 2000-record directory in full.
func BenchmarkInspect(b *testing.B) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		b.Run(format, func(b *testing.B) {
			dir := b.TempDir()
			opts := testOptions(dir, format)
			opts.PartSize = 500
			opts.SyncInterval = time.Hour
			s := mustOpen(b, opts)
			const n = 2000
			for i := range n {
				r := benchRecord(i)
				r.ID = strconv.Itoa(i)
				if err := s.Write(r); err != nil {
					b.Fatal(err)
				}
			}
			if err := s.Close(); err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				r, err := Dir(dir)
				if err != nil || r.Records != n {
					b.Fatalf("records %d, err %v", r.Records, err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "records/s")
		})
	}
}

// The audit while a run writes: parts are finalized under its feet (.open
// renamed, journals converted and removed), and every look still sees a
// consistent directory: no problem, no error, never fewer records than the
// look before, and the exact figures once the writer closes.
func TestInspectWhileWriting(t *testing.T) {
	for _, format := range []string{sink.FormatJSONL, sink.FormatParquet} {
		t.Run(format, func(t *testing.T) {
			dir := t.TempDir()
			opts := testOptions(dir, format)
			opts.PartSize = 7
			s := mustOpen(t, opts)
			const n = 100
			done := make(chan error, 1)
			go func() {
				for i := range n {
					if err := s.Write(testRecord(i)); err != nil {
						done <- err
						return
					}
				}
				done <- s.Close()
			}()
			var last int64
			looks := 0
			for writing := true; writing; looks++ {
				select {
				case err := <-done:
					if err != nil {
						t.Fatal(err)
					}
					writing = false
				default:
				}
				r, err := Dir(dir)
				if err != nil {
					t.Fatalf("look %d: %v", looks, err)
				}
				if !r.OK() || r.Records < last || r.Distinct != r.Records {
					t.Fatalf("look %d: records %d (before %d), distinct %d, problems %q", looks, r.Records, last, r.Distinct, r.Problems)
				}
				last = r.Records
			}
			r := mustAudit(t, dir)
			if r.Records != n || !r.OK() || len(r.Notes) != 0 {
				t.Errorf("after close: records %d problems %q notes %q", r.Records, r.Problems, r.Notes)
			}
			t.Logf("%d looks while writing", looks)
		})
	}
}

// The audit holds each key summary of the manifest to the keys its part
// holds: a resume trusts the summary of an unchanged part instead of
// reading it.
func TestInspectChecksSummaries(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, sink.FormatJSONL))
	writeRange(t, s, 0, 25)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if a := mustAudit(t, dir); !a.OK() {
		t.Fatalf("audit of a clean directory: %v", a.Problems)
	}
	m, err := sink.ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	m.Parts[1].Keys[0].First++ // ids 11, 13, ... instead of 10, 12, ...
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	putFile(t, filepath.Join(dir, sink.ManifestName), string(data)+"\n")
	a := mustAudit(t, dir)
	if len(a.Problems) != 1 || !strings.Contains(a.Problems[0], "part-000001.jsonl: the manifest's key summary") {
		t.Errorf("problems %q, want the summary of part-000001.jsonl named", a.Problems)
	}
}

// TestInspectReadsPartLog: a running job's manifest.json lists none of
// the parts it finalized; the audit reads them from the log.
func TestInspectReadsPartLog(t *testing.T) {
	dir := t.TempDir()
	s := mustOpen(t, testOptions(dir, sink.FormatJSONL))
	defer s.Close()
	writeRange(t, s, 0, 25)
	r := mustAudit(t, dir)
	if r.Manifest == nil || r.Manifest.Parts != 2 || r.Manifest.Records != 20 {
		t.Fatalf("manifest summary %+v, want the log's 2 shards and 20 records", r.Manifest)
	}
	for _, sh := range r.Parts {
		if sh.State == PartOK && !sh.Listed {
			t.Errorf("%s is in the log but the audit says it is not listed", sh.Name)
		}
	}
	if !r.OK() {
		t.Errorf("audit: %v", r.Problems)
	}
}
