package main

import (
	"encoding/json"
	"github.com/synthgen/synthgen/config"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/batchapi"
	"github.com/synthgen/synthgen/sink"
)

// TestRunCost: with endpoint.price, every record's cost is its usage at
// the price (cached prompt tokens at cached_input), report.json's cost is
// their sum and, the run over, its projection the same; the progress line
// and the summary say it. Without a price nothing of it is anywhere.
func TestRunCost(t *testing.T) {
	t.Parallel()
	const prompts = 20
	m := startMock(t, mockserver.Options{MeanTokens: 30, Seed: 9, CachedTokens: 3})
	dir := t.TempDir()
	data := writeShareGPT(t, dir, prompts)
	run := func(name string, extra ...string) (string, string) {
		out := filepath.Join(dir, name)
		args := append([]string{"run", "--dataset.path", data, "--endpoint.base_url", m.BaseURL,
			"--output.dir", out, "--concurrency", "4", "--progress.interval", "50ms"}, extra...)
		p := startSynthgen(t, name, args...)
		if code := p.wait(t, 60*time.Second); code != 0 {
			t.Fatalf("%s: exit %d; stderr:\n%s", name, code, p.stderr(t))
		}
		return out, p.stdout(t) + p.stderr(t)
	}

	out, stderr := run("priced", "--endpoint.price", `{"input":2,"output":8,"cached_input":0.5}`)
	var sum float64
	checkCompleteWith(t, out, prompts, func(r sink.Record, i int) {
		want := (float64(r.PromptTokens-3)*2 + 3*0.5 + float64(r.CompletionTokens)*8) / 1e6
		if r.CachedTokens != 3 || math.Abs(r.Cost-want) > 1e-12 {
			t.Errorf("record %s: cached_tokens %d cost %v, want 3 and %v", r.ID, r.CachedTokens, r.Cost, want)
		}
		sum += r.Cost
	})
	rep := readReport(t, out)
	if rep.Cost == nil || math.Abs(*rep.Cost-sum) > 1e-9 || rep.CostProjected == nil || math.Abs(*rep.CostProjected-sum) > 1e-9 {
		t.Errorf("report.json cost %v projected %v, want the records' sum %v for both", rep.Cost, rep.CostProjected, sum)
	}
	if !regexp.MustCompile(`\n\s+cost\s+\$[0-9.]+\s+\$[0-9.]+ an answer\n`).MatchString(stderr) || !regexp.MustCompile(`\| cost \$[0-9.]+ so far, ~\$[0-9.]+ projected`).MatchString(stderr) {
		t.Errorf("the output says no cost:\n%s", stderr)
	}

	// The view's run page shows report.json's cost among its figures.
	url, _ := startView(t, out)
	_, page := httpGet(t, url)
	if !strings.Contains(page, `data-key="cost"`) || !strings.Contains(page, `data-key="cost_projected"`) {
		t.Error("the view's run page shows no cost")
	}
	checkFiguresAreTheReport(t, page, out)

	// inspect sums the records' cost beside their tokens; a record's, under
	// a cent, with its significant digits, never $0.0000.
	text, err := runInspectCmd(t, out)
	if err != nil || !regexp.MustCompile(`\ncost\s+\$0\.0*[1-9]\d* \(avg \$0\.0*[1-9]\d* per record\)\n`).MatchString(text) ||
		!regexp.MustCompile(`prompt [0-9,]+ \(60 cached\)`).MatchString(text) {
		t.Errorf("inspect (%v) says no cost:\n%s", err, text)
	}
	js, err := runInspectCmd(t, "--json", out)
	var doc struct {
		Dirs []struct {
			Cost         float64 `json:"cost"`
			CachedTokens int64   `json:"cached_tokens"`
		} `json:"dirs"`
	}
	if err != nil || json.Unmarshal([]byte(js), &doc) != nil || len(doc.Dirs) != 1 ||
		math.Abs(doc.Dirs[0].Cost-sum) > 1e-9 || doc.Dirs[0].CachedTokens != 3*prompts {
		t.Errorf("inspect --json (%v): %+v, want cost %v and %d cached tokens\n%s", err, doc, sum, 3*prompts, js)
	}

	// The price is no part of the job: another resumes the directory.
	again := startSynthgen(t, "repriced", "run", "--dataset.path", data, "--endpoint.base_url", m.BaseURL,
		"--output.dir", out, "--endpoint.price", `{"input":3,"output":9}`, "--quiet")
	if code := again.wait(t, 60*time.Second); code != 0 {
		t.Errorf("a resume at another price: exit %d; stderr:\n%s", code, again.stderr(t))
	}

	out, stderr = run("unpriced")
	b, err := os.ReadFile(filepath.Join(out, runfiles.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(b), `"cost`) || strings.Contains(stderr, "cost") {
		t.Errorf("a run without a price speaks of cost:\nreport.json %s\nstderr %s", b, stderr)
	}
	checkCompleteWith(t, out, prompts, func(r sink.Record, i int) {
		if r.Cost != 0 || r.CachedTokens != 3 {
			t.Errorf("unpriced record %s: cost %v cached_tokens %d, want 0 and 3", r.ID, r.Cost, r.CachedTokens)
		}
	})
}

// TestBatchCostAtPriceFactor: in the batch mode the tokens are billed at
// batch.price_factor of endpoint.price (0.5 by default, as OpenAI bills a
// batch): each record's cost and report.json's say so.
func TestBatchCostAtPriceFactor(t *testing.T) {
	t.Parallel()
	const prompts = 12
	m := startMock(t, mockserver.Options{MeanTokens: 30, Seed: 4, Batch: batchapi.Options{Validating: time.Millisecond, InProgress: 10 * time.Millisecond, Finalizing: time.Millisecond}})
	dir := t.TempDir()
	data := writeShareGPT(t, dir, prompts)
	for _, tc := range []struct {
		name   string
		extra  []string
		factor float64
	}{{"default", nil, 0.5}, {"factor", []string{"--batch.price_factor", "0.25"}, 0.25}} {
		out := filepath.Join(dir, tc.name)
		args := append([]string{"run", "--dataset.path", data, "--endpoint.base_url", m.BaseURL, "--output.dir", out,
			"--endpoint.price", `{"input":2,"output":8}`, "--batch.enabled", "--batch.max_requests", "5", "--batch.poll_interval", "5ms", "--quiet"}, tc.extra...)
		p := startSynthgen(t, tc.name, args...)
		if code := p.wait(t, 2*time.Minute); code != 0 {
			t.Fatalf("%s: exit %d; stderr:\n%s", tc.name, code, p.stderr(t))
		}
		var sum float64
		checkCompleteWith(t, out, prompts, func(r sink.Record, i int) {
			want := tc.factor * (float64(r.PromptTokens)*2 + float64(r.CompletionTokens)*8) / 1e6
			if r.CompletionTokens == 0 || math.Abs(r.Cost-want) > 1e-12 {
				t.Errorf("%s: record %s: cost %v for %d+%d tokens, want %v", tc.name, r.ID, r.Cost, r.PromptTokens, r.CompletionTokens, want)
			}
			sum += r.Cost
		})
		if rep := readReport(t, out); rep.Cost == nil || math.Abs(*rep.Cost-sum) > 1e-9 {
			t.Errorf("%s: report.json cost %v, want the records' %v", tc.name, rep.Cost, sum)
		}
	}
}

// TestPriceFactorCoversCachedInput: batch.price_factor scales every part
// of the price, the cached input's too, whether given or taken from input.
func TestPriceFactorCoversCachedInput(t *testing.T) {
	t.Parallel()
	cached := 1.0
	for _, tc := range []struct {
		tp         config.TokenPrice
		wantCached float64
	}{{config.TokenPrice{Input: 2, Output: 8, CachedInput: &cached}, 0.5}, {config.TokenPrice{Input: 2, Output: 8}, 1}} {
		p, ok := priceOf(config.Price{All: &tc.tp}, 0.5)("m")
		if !ok || p.Input != 1 || p.Output != 4 || p.CachedInput != tc.wantCached {
			t.Errorf("%+v at 0.5: %+v, want input 1, output 4, cached_input %v", tc.tp, p, tc.wantCached)
		}
	}
}
