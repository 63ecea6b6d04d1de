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
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/ui/progress"
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

// The mock's batch model the auto runs go against: prompts of kneePrompt
// tokens, answers of at most kneeMaxTokens, 10 ms a token slowing with the
// batch, and a KV budget of knee x (prompt + answer) tokens, so that up to
// knee requests are never preempted and more are. Where the limit settles
// on such a server is judged in generator/autoconc (knee_test.go), on a
// clock and servers that test controls: here, on the machine's clock and
// CPU, only what does not depend on them is checked: the loop is wired
// into a real run.
const (
	kneePrompt    = 400
	kneeMaxTokens = 24
)

func kneeMock(knee int) mockserver.Options {
	return mockserver.Options{
		TokenDelay: 10 * time.Millisecond, BatchScale: 400, MeanTokens: 20, Seed: 7,
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
		"--generation.stream=false",
		"--concurrency", concurrency,
		"--progress.interval", "500ms",
	}
	return cliRunFor(t, 3*time.Minute, append(args, extra...)...)
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

// autoReport is what report.json says of concurrency: auto.
type autoReport struct {
	ConcurrencyAuto *autoconc.Record `json:"concurrency_auto"`
	Endpoints       []runstats.EndpointRecord
}

func readAutoReport(t *testing.T, dir string) autoReport {
	t.Helper()
	var rep autoReport
	b, err := os.ReadFile(filepath.Join(dir, runfiles.ReportFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	return rep
}

// TestAutoConcurrencyRun: a run with concurrency: auto against the batch
// model: the loop starts at 16 and moves the limit (a server far from its
// knee lets it grow), each move a line on stderr; report.json's
// concurrency_auto holds the last move's limit, the progress lines show
// the limit, and every prompt is answered.
func TestAutoConcurrencyRun(t *testing.T) {
	t.Parallel()
	const prompts = 300
	ts := httptest.NewServer(mockserver.New(kneeMock(100)))
	t.Cleanup(ts.Close)
	dir := filepath.Join(t.TempDir(), "out")
	// Streamed: the controller judges a reading's tokens as they come, so
	// the limit moves within the first readings.
	res := kneeRun(t, ts.URL+"/v1", kneeDataset(t, prompts, kneePrompt), dir, "auto:400", "--generation.stream=true")
	res.ok(t, "concurrency auto:400")
	if !strings.Contains(res.stderr, "concurrency: auto, starting at 16, up to 400, from "+ts.URL+"/metrics every 500ms") {
		t.Errorf("no start line naming the start, the ceiling, the metrics and the interval:\n%s", res.stderr)
	}
	moves := autoMoves(t, res.stderr)
	for _, m := range moves {
		t.Logf("auto: -> %d at %s: %s", m.to, m.at, m.why)
	}
	if len(moves) == 0 {
		t.Fatalf("concurrency: auto never moved the limit; stderr:\n%s", res.stderr)
	}
	rep := readAutoReport(t, dir)
	if rep.ConcurrencyAuto == nil || rep.ConcurrencyAuto.Limit != moves[len(moves)-1].to || rep.ConcurrencyAuto.Moves != len(moves) {
		t.Errorf("report.json's concurrency_auto %+v, want the last move's limit %d after %d moves", rep.ConcurrencyAuto, moves[len(moves)-1].to, len(moves))
	}
	if !strings.Contains(res.stdout, " | concurrency ") {
		t.Errorf("the progress lines do not show the limit:\n%s", res.stdout)
	}
	if n := len(readRecords(t, dir)); n != prompts {
		t.Errorf("%d records, want %d", n, prompts)
	}
}

// TestAutoWithoutVLLMMetrics: a server whose /metrics holds none of
// vLLM's (a proxy's own) cannot steer the limit; its answers do: the run
// ends with every record, and stderr and report.json say once which
// steering is in force and why.
func TestAutoWithoutVLLMMetrics(t *testing.T) {
	_, base := cliMock(t, func(h http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/metrics" {
				fmt.Fprintln(w, "# a proxy's own metrics\nproxy_requests_total 3")
				return
			}
			h.ServeHTTP(w, r)
		})
	})
	dir := filepath.Join(t.TempDir(), "out")
	cj := cliJob{baseURL: base, data: cliDataset(t, 5, 0), dir: dir}
	args := slices.DeleteFunc(cj.args("--concurrency", "auto"), func(a string) bool { return a == "--quiet" }) // the notes say it
	res := cliRun(t, args...)
	res.ok(t, "concurrency auto without vLLM metrics")
	want := "no server metrics at " + strings.TrimSuffix(base, "/v1") + "/metrics (not vLLM's Prometheus text): steering by 429s and latency, ceiling 512"
	if n := strings.Count(res.stderr, want); n != 1 {
		t.Errorf("stderr says %d times %q:\n%s", n, want, res.stderr)
	}
	if rep := readAutoReport(t, dir); rep.ConcurrencyAuto == nil || rep.ConcurrencyAuto.Steering != want {
		t.Errorf("report.json's concurrency_auto %+v, want steering %q", rep.ConcurrencyAuto, want)
	}
	if n := len(readRecords(t, dir)); n != 5 {
		t.Errorf("%d records, want 5", n)
	}
}

// TestAutoShown: the limit and why it last moved, in the plain line's last
// field, the bar's short one and --metrics-addr.
func TestAutoShown(t *testing.T) {
	a := autoconc.NewState(16, 400)
	a.Moved(24, "grow: queue empty, throughput +41%", time.Unix(10, 0))
	rec := a.Record()
	if got := progress.AutoText(rec); got != " | concurrency 24 (grow: queue empty, throughput +41%)" {
		t.Errorf("plain line field %q", got)
	}
	if got := progress.AutoBar(rec); got != "limit 24 grow" {
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
// its own metrics: the start line names both, each endpoint's limit is set
// (report.json's endpoints) and the run's limit is their sum. The second
// counts generated tokens only when a request ends, with no counter before
// the first (llm-d-inference-sim): auto starts against it all the same,
// its throughput being the client's own count. (Where each limit settles:
// generator/autoconc's TestAutoPerEndpoint and
// TestAutoKneeWhenTheServerCountsAtEnd.)
func TestAutoPerEndpoint(t *testing.T) {
	t.Parallel()
	const (
		knee    = 40
		prompts = 200
	)
	var urls []string
	for i := range 2 {
		o := kneeMock(knee)
		o.CountTokensAtEnd = i == 1
		ts := httptest.NewServer(mockserver.New(o))
		t.Cleanup(ts.Close)
		urls = append(urls, ts.URL+"/v1")
	}
	dir := filepath.Join(t.TempDir(), "out")
	res := kneeRun(t, strings.Join(urls, ","), kneeDataset(t, prompts, kneePrompt), dir, "auto:400", "--generation.stream=true")
	res.ok(t, "concurrency auto:400 on two endpoints")
	if !strings.Contains(res.stderr, urls[0]) || !strings.Contains(res.stderr, urls[1]) {
		t.Errorf("the start line does not name both metrics sources:\n%s", res.stderr)
	}
	rep := readAutoReport(t, dir)
	if rep.ConcurrencyAuto == nil || len(rep.Endpoints) != 2 {
		t.Fatalf("report.json: concurrency_auto %+v, endpoints %+v", rep.ConcurrencyAuto, rep.Endpoints)
	}
	sum, answers := int64(0), int64(0)
	for _, ep := range rep.Endpoints {
		t.Logf("%s: limit %d, %d answers", ep.URL, ep.Limit, ep.Completed)
		if ep.Limit < 1 || ep.Limit > 400 {
			t.Errorf("%s ended at limit %d: not a limit of 1..400", ep.URL, ep.Limit)
		}
		sum += ep.Limit
		answers += ep.Completed
	}
	if int64(rep.ConcurrencyAuto.Limit) != sum {
		t.Errorf("the run's limit %d is not the sum %d of the endpoints'", rep.ConcurrencyAuto.Limit, sum)
	}
	if answers != prompts {
		t.Errorf("%d answers from the endpoints, want %d", answers, prompts)
	}
}
