package main

import (
	"fmt"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/ui/progress"
)

// TestRunPromptsTooLong: against a server with max_model_len 100 and
// max_tokens 64, three prompts of 50 words among seven short ones can never
// be answered. Each is asked once (the mock counts 10 requests, 3 refused:
// no retry), ends as one error record of cause too_long with vLLM's message
// and the sizes, the others are answered, the summary says how many were too
// long for which context, and the run exits 3 (some failed for good).
func TestRunPromptsTooLong(t *testing.T) {
	m := mockserver.New(mockserver.Options{MeanTokens: 16, Seed: 7, MaxModelLen: 100})
	ts := httptest.NewServer(m)
	t.Cleanup(ts.Close)

	long := map[int]bool{2: true, 5: true, 7: true}
	var b strings.Builder
	for i := range 10 {
		text := fmt.Sprintf("question %d", i)
		if long[i] {
			text += strings.Repeat(" word", 48) // 50 words: 50 prompt tokens + 64 > 100
		}
		fmt.Fprintf(&b, `{"messages":[{"role":"user","content":%q}]}`+"\n", text)
	}
	data := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cj := cliJob{baseURL: ts.URL + "/v1", data: data, dir: filepath.Join(t.TempDir(), "out")}

	r := cliRun(t, cj.args()...)
	if code := exitCode(r.err); code != exitIncomplete {
		t.Fatalf("exit %d (%v), want %d\nstderr:\n%s", code, r.err, exitIncomplete, r.stderr)
	}
	if st := m.Stats(); st.Requests != 10 || st.TooLong != 3 {
		t.Errorf("mock saw %d requests, %d too long; want 10 and 3 (each long prompt asked once)", st.Requests, st.TooLong)
	}
	wantIDs(t, "too long", cliRecords(t, cj.dir), "0", "1", "3", "4", "6", "8", "9")

	errs := cliErrors(t, cj.dir)
	var ids []string
	for _, e := range errs {
		ids = append(ids, e.ID)
		want := "prompt too long for the model's context (max_model_len 100, requested 114, prompt 50, completion 64): " +
			"This model's maximum context length is 100 tokens. However, you requested 64 output tokens and your prompt contains 50 input tokens, for a total of 114 tokens."
		if e.Cause != wire.CauseTooLong || e.Status != 400 || e.Attempts != 1 || !strings.HasPrefix(e.Message, want) {
			t.Errorf("error record %+v\nwant cause too_long, status 400, attempts 1, message starting %q", e, want)
		}
	}
	slices.Sort(ids)
	if !slices.Equal(ids, []string{"2", "5", "7"}) {
		t.Errorf("error records for %v, want 2, 5, 7", ids)
	}

	if !strings.HasPrefix(r.stdout, "incomplete 7/10 ") {
		t.Errorf("summary %q, want incomplete 7/10", r.stdout)
	}
	if !strings.Contains(r.stdout, "3 prompts too long for the model's context (max_model_len 100)") {
		t.Errorf("summary does not count the too-long prompts apart:\n%s", r.stdout)
	}
	t.Logf("stdout:\n%s\nstderr:\n%s", r.stdout, r.stderr)
}

// The summary's line for too-long prompts: one or many, with the context
// when the server listed it and without when it did not.
func TestTooLongLine(t *testing.T) {
	for _, c := range []struct {
		n, ctx int64
		want   string
	}{
		{37, 4096, "37 prompts too long for the model's context (max_model_len 4096)"},
		{1, 4096, "1 prompt too long for the model's context (max_model_len 4096)"},
		{2, 0, "2 prompts too long for the model's context"},
	} {
		if got := progress.TooLongLine(c.n, c.ctx); got != c.want {
			t.Errorf("tooLongLine(%d, %d) = %q, want %q", c.n, c.ctx, got, c.want)
		}
	}
}
