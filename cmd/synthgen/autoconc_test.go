package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/internal/mockserver"
)

// kneeDataset writes n prompts of exactly words words each (the mock
// counts a prompt's words as its tokens).
func kneeDataset(t *testing.T, n, words int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"q%d%s"}]}`+"\n", i, strings.Repeat(" w", words-1))
	}
	path := filepath.Join(t.TempDir(), "prompts.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// The knee model both auto tests run against: prompts of kneePrompt
// tokens, answers of at most kneeMaxTokens, 40 ms a token slowing with the
// batch, and a KV budget of knee x (prompt + answer) tokens, so that up to
// knee requests are never preempted and more are (see
// TestAutoConcurrencyFindsTheKnee).
const (
	kneePrompt    = 400
	kneeMaxTokens = 24
)

func kneeMock(knee int) mockserver.Options {
	return mockserver.Options{
		TokenDelay: 40 * time.Millisecond, BatchScale: 400, MeanTokens: 20, Seed: 7,
		KVBudget: knee * (kneePrompt + kneeMaxTokens), MaxRunning: 512,
	}
}

// kneeRun runs synthgen over data against base (one URL or several,
// comma-separated) into dir at the given concurrency, plain answers unless
// extra flags (after the others: the last of a flag wins) say otherwise.
func kneeRun(t *testing.T, base, data, dir, concurrency string, extra ...string) cliResult {
	t.Helper()
	args := []string{"run",
		"--endpoint.base_url", base,
		"--dataset.path", data,
		"--output.dir", dir,
		"--output.format", "jsonl",
		"--output.sync_interval", "200ms",
		"--generation.max_tokens", strconv.Itoa(kneeMaxTokens),
		// Plain answers: the client parses one body per answer instead
		// of a chunk per token, so on a loaded machine under -race the
		// server's pace, not the client's CPU, sets the throughput (the
		// controller reads the client's count of each answer at its end).
		"--generation.stream=false",
		"--concurrency", concurrency,
		"--progress.interval", "500ms",
	}
	return cliRunFor(t, 3*time.Minute, append(args, extra...)...)
}

// settledAt is when the limit last entered lo..hi and stayed there to the
// end; -1: it ended outside.
func settledAt(moves []autoMove, lo, hi int) time.Duration {
	settled := time.Duration(-1)
	for _, m := range moves {
		switch {
		case m.to < lo || m.to > hi:
			settled = -1
		case settled < 0:
			settled = m.at
		}
	}
	return settled
}

// autoMove is one "concurrency A -> B at T: why" line.
type autoMove struct {
	to  int
	at  time.Duration
	why string
}

var moveLine = regexp.MustCompile(`(?m)^concurrency (\d+) -> (\d+) at (\S+): (.*)$`)

func autoMoves(t *testing.T, stderr string) []autoMove {
	t.Helper()
	var moves []autoMove
	for _, m := range moveLine.FindAllStringSubmatch(stderr, -1) {
		to, _ := strconv.Atoi(m[2])
		at, err := time.ParseDuration(m[3])
		if err != nil {
			t.Fatalf("move line %q: %v", m[0], err)
		}
		moves = append(moves, autoMove{to: to, at: at, why: m[4]})
	}
	return moves
}

// TestAutoConcurrencyFindsTheKnee is the judged test of concurrency: auto.
//
// The mock's batch model is set so that its throughput peaks at K = 100 in
// flight, by its formula: every prompt is 400 tokens and every answer at
// most 24, and the KV budget is 100 x (400 + 24) tokens, so up to 100
// requests can never be preempted; above that, admission lets in about
// budget/400 = 106 and their growth preempts the newest ones, which redo
// their work, while the rest queue. Below 100, per-token time
// 40ms x (1 + running/400) makes throughput rise almost in proportion
// (TestBatchModelKnee in internal/mockserver shows the shape on counters).
// The time scale keeps the whole test near 30 s, and the client's work low
// enough (about 2,000 tokens/s at the knee, answers not streamed) that the
// server, not the client under -race on a loaded machine, sets the
// throughput.
//
// A run with concurrency: auto:400 must have its limit within 20% of K
// (80..120) from some moment in the first minute of its own elapsed time to
// its end, and cause fewer preemptions (the mock's counter) than a run of
// the same prompts at a fixed 200. The fixed run preempts for certain: its
// first 106 requests are admitted together, prompts filling the budget,
// and their first tokens overflow it.
func TestAutoConcurrencyFindsTheKnee(t *testing.T) {
	if testing.Short() {
		t.Skip("about 30 s of load: not with -short")
	}
	const (
		knee    = 100
		prompts = 1500
	)
	opts := kneeMock(knee)
	data := kneeDataset(t, prompts, kneePrompt)
	runAt := func(concurrency string) (cliResult, mockserver.Stats, string) {
		m := mockserver.New(opts)
		ts := httptest.NewServer(m)
		defer ts.Close()
		dir := filepath.Join(t.TempDir(), "out")
		res := kneeRun(t, ts.URL+"/v1", data, dir, concurrency)
		res.ok(t, "concurrency "+concurrency)
		return res, m.Stats(), dir
	}

	auto, autoStats, autoDir := runAt("auto:400")
	moves := autoMoves(t, auto.stderr)
	for _, m := range moves {
		t.Logf("auto: -> %d at %s: %s", m.to, m.at, m.why)
	}
	if len(moves) == 0 {
		t.Fatalf("concurrency: auto never moved the limit; stderr:\n%s", auto.stderr)
	}
	// settled is when the limit last entered 80..120 and stayed there.
	lo, hi := knee*8/10, knee*12/10
	settled := settledAt(moves, lo, hi)
	var rep struct {
		DurationS       float64          `json:"duration_s"`
		ConcurrencyAuto *autoconc.Record `json:"concurrency_auto"`
	}
	b, err := os.ReadFile(filepath.Join(autoDir, runfiles.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	t.Logf("auto: %d answers in %.1f s, %d preemptions, settled within 20%% of %d at %s; report: %+v",
		autoStats.Completed, rep.DurationS, autoStats.Preemptions, knee, settled, rep.ConcurrencyAuto)
	switch {
	case settled < 0:
		t.Errorf("the limit ended outside %d..%d: moves %+v", lo, hi, moves)
	case settled > time.Minute:
		t.Errorf("the limit settled within %d..%d only at %s of the run, after the first minute", lo, hi, settled)
	}
	if rep.ConcurrencyAuto == nil || rep.ConcurrencyAuto.Limit != moves[len(moves)-1].to {
		t.Errorf("report.json's concurrency_auto %+v, want the last move's limit %d", rep.ConcurrencyAuto, moves[len(moves)-1].to)
	}
	if !strings.Contains(auto.stdout, " | concurrency ") {
		t.Errorf("the progress lines do not show the limit:\n%s", auto.stdout)
	}

	_, fixedStats, _ := runAt("200")
	t.Logf("fixed 200: %d answers, %d preemptions, %d tokens recomputed; auto: %d tokens recomputed",
		fixedStats.Completed, fixedStats.Preemptions, fixedStats.Recomputed, autoStats.Recomputed)
	if autoStats.Preemptions >= fixedStats.Preemptions {
		t.Errorf("preemptions: auto %d, fixed 200 %d; want fewer with auto", autoStats.Preemptions, fixedStats.Preemptions)
	}
	if autoStats.Completed != prompts || fixedStats.Completed != prompts {
		t.Errorf("answers: auto %d, fixed %d; want %d each", autoStats.Completed, fixedStats.Completed, prompts)
	}
}

// TestAutoKneeWhenTheServerCountsAtEnd is the judged test of a server that
// counts generated tokens only when a request finishes, with no counter
// before the first one (llm-d-inference-sim; the mock with
// CountTokensAtEnd). The same batch-model mock, with a knee at K = 40 (the
// knee test's model at a smaller KV budget, so that streamed answers cost
// the client little), is run once counting per token and once at the
// end, answers streamed (the default). concurrency: auto starts against
// both and must end within 20% of K in both, and the two limits within 20%
// of each other: auto's throughput is the client's own streamed count, and
// the server's counter steers nothing.
func TestAutoKneeWhenTheServerCountsAtEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("about 25 s of load: not with -short")
	}
	const (
		knee    = 40
		prompts = 600
	)
	data := kneeDataset(t, prompts, kneePrompt)
	final := map[bool]int{}
	for _, atEnd := range []bool{false, true} {
		opts := kneeMock(knee)
		opts.CountTokensAtEnd = atEnd
		m := mockserver.New(opts)
		ts := httptest.NewServer(m)
		dir := filepath.Join(t.TempDir(), "out")
		res := kneeRun(t, ts.URL+"/v1", data, dir, "auto:400", "--generation.stream=true")
		ts.Close()
		res.ok(t, fmt.Sprintf("concurrency auto:400, tokens counted at the end %v", atEnd))
		moves := autoMoves(t, res.stderr)
		if len(moves) == 0 {
			t.Fatalf("tokens counted at the end %v: the limit never moved; stderr:\n%s", atEnd, res.stderr)
		}
		var why []string
		for _, mv := range moves {
			why = append(why, fmt.Sprintf("%d at %s (%s)", mv.to, mv.at, mv.why))
		}
		final[atEnd] = moves[len(moves)-1].to
		lo, hi := knee*8/10, knee*12/10
		settled := settledAt(moves, lo, hi)
		t.Logf("tokens counted at the end %v: %d answers, %d preemptions, ended at %d, within 20%% of %d from %s; moves: %s",
			atEnd, m.Stats().Completed, m.Stats().Preemptions, final[atEnd], knee, settled, strings.Join(why, " | "))
		if settled < 0 {
			t.Errorf("tokens counted at the end %v: the limit ended outside %d..%d: %s", atEnd, lo, hi, strings.Join(why, " | "))
		}
	}
	if a, b := final[true], final[false]; 5*a < 4*b || 5*a > 6*b {
		t.Errorf("the limit ended at %d against the server counting at the end, %d against the one counting per token: more than 20%% apart", a, b)
	}
}

// TestAutoRefusedWithoutVLLMMetrics: a server with no vLLM metrics cannot
// steer the limit; the run is refused before its first request, naming
// the key and what to do, and the directory says so in report.json.
func TestAutoRefusedWithoutVLLMMetrics(t *testing.T) {
	var chats int
	m, base := cliMock(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			switch r.URL.Path {
			case "/metrics":
				fmt.Fprintln(w, "# a proxy's own metrics\nproxy_requests_total 3")
				return
			case "/v1/chat/completions":
				chats++
			}
			h.ServeHTTP(w, r)
		})
	})
	dir := filepath.Join(t.TempDir(), "out")
	cj := cliJob{baseURL: base, data: cliDataset(t, 5, 0), dir: dir}
	res := cliRun(t, cj.args("--concurrency", "auto")...)
	if res.err == nil || exitCode(res.err) != exitUsage {
		t.Fatalf("exit %v, want the usage exit; stderr:\n%s", res.err, res.stderr)
	}
	for _, want := range []string{"concurrency: auto", "vllm:generation_tokens_total", "/metrics"} {
		if !strings.Contains(res.err.Error(), want) {
			t.Errorf("error %q does not name %q", res.err, want)
		}
	}
	if !strings.Contains(res.hint(), "set concurrency to a number") {
		t.Errorf("hint %q", res.hint())
	}
	if chats != 0 || m.Stats().Requests != 0 {
		t.Errorf("%d requests sent before the refusal", chats)
	}
	b, err := os.ReadFile(filepath.Join(dir, runfiles.ReportFile))
	if err != nil || !strings.Contains(string(b), "concurrency: auto") {
		t.Errorf("report.json does not say why: %v %s", err, b)
	}
}

// TestAutoShown: the limit and why it last moved, in the plain line's last
// field, the bar's short one and --metrics-addr.
func TestAutoShown(t *testing.T) {
	a := autoconc.NewState(16, 400)
	a.Moved(24, "grow: queue empty, throughput +41%", time.Unix(10, 0))
	rec := a.Record()
	if got := autoText(rec); got != " | concurrency 24 (grow: queue empty, throughput +41%)" {
		t.Errorf("plain line field %q", got)
	}
	if got := autoBar(rec); got != "limit 24 grow" {
		t.Errorf("bar field %q", got)
	}
	if rec.Moves != 1 || rec.Ceiling != 400 || !rec.MovedAt.Equal(time.Unix(10, 0)) {
		t.Errorf("record %+v", rec)
	}

	m, err := startSelfMetrics("127.0.0.1:0", runstats.NewStats(nil), io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	m.registerAuto(a)
	fams := scrapeSelf(t, m.URL())
	if v, ok := metricValue(fams, "synthgen_concurrency_limit"); !ok || v != 24 {
		t.Errorf("synthgen_concurrency_limit = %v, %v; want 24", v, ok)
	}
	if v, ok := metricValue(fams, "synthgen_concurrency_moves_total"); !ok || v != 1 {
		t.Errorf("synthgen_concurrency_moves_total = %v, %v; want 1", v, ok)
	}
	var none *selfMetricsServer
	none.registerAuto(a) // no --metrics-addr: nothing to do
	m.registerAuto(nil)  // a fixed concurrency: nothing to add
}

// TestAutoPerEndpoint: with two replicas, concurrency: auto steers each by
// its own metrics. Both mocks peak at 40 in flight (the knee test's model at
// a smaller KV budget); each endpoint's limit is set (report.json's
// endpoints), stays near its own knee rather than the ceiling, and the
// run's limit is their sum.
func TestAutoPerEndpoint(t *testing.T) {
	if testing.Short() {
		t.Skip("about 20 s of load: not with -short")
	}
	const (
		knee    = 40
		prompts = 900
	)
	var urls []string
	for range 2 {
		ts := httptest.NewServer(mockserver.New(kneeMock(knee)))
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL+"/v1")
	}
	dir := filepath.Join(t.TempDir(), "out")
	res := kneeRun(t, strings.Join(urls, ","), kneeDataset(t, prompts, kneePrompt), dir, "auto:400")
	res.ok(t, "concurrency auto:400 on two endpoints")
	if !strings.Contains(res.stderr, urls[0]) || !strings.Contains(res.stderr, urls[1]) {
		t.Errorf("the start line does not name both metrics sources:\n%s", res.stderr)
	}
	var rep struct {
		ConcurrencyAuto *autoconc.Record `json:"concurrency_auto"`
		Endpoints       []runstats.EndpointRecord
	}
	b, err := os.ReadFile(filepath.Join(dir, runfiles.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	if rep.ConcurrencyAuto == nil || len(rep.Endpoints) != 2 {
		t.Fatalf("report.json: concurrency_auto %+v, endpoints %+v", rep.ConcurrencyAuto, rep.Endpoints)
	}
	sum := int64(0)
	for _, ep := range rep.Endpoints {
		t.Logf("%s: limit %d, %d answers", ep.URL, ep.Limit, ep.Completed)
		if ep.Limit < knee/2 || ep.Limit > 2*knee {
			t.Errorf("%s ended at limit %d: not steered to its own knee %d (within %d..%d)", ep.URL, ep.Limit, knee, knee/2, 2*knee)
		}
		sum += ep.Limit
	}
	if int64(rep.ConcurrencyAuto.Limit) != sum {
		t.Errorf("the run's limit %d is not the sum %d of the endpoints'", rep.ConcurrencyAuto.Limit, sum)
	}
}
