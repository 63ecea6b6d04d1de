package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/internal/mockserver"
	"github.com/synthgen/synthgen/internal/promscrape"
)

// TestProgressNamesEndpoints: with several endpoints the line and the bar
// say how many are up and name a replica that is away (password masked,
// as the snapshot holds it); with one endpoint nothing changes.
func TestProgressNamesEndpoints(t *testing.T) {
	stats, clk := rampStats()
	snap := stats.Snapshot()
	one := formatLine(snap, nil, nil)
	if strings.Contains(one, "eps") {
		t.Errorf("one endpoint: the line speaks of endpoints: %q", one)
	}
	snap.Endpoints = []runstats.EndpointSnapshot{
		{URL: "http://a:8000/v1", State: runstats.EndpointUp},
		{URL: "http://b:8000/v1", State: runstats.EndpointUp},
		{URL: "http://u:xxxxx@c:8000/v1", State: runstats.EndpointUp},
	}
	if got := formatLine(snap, nil, nil); !strings.HasSuffix(got, " | eps 3/3 up") {
		t.Errorf("three up: line %q, want it to end in \" | eps 3/3 up\"", got)
	}
	snap.Endpoints[2].State = runstats.EndpointProbing
	snap.Endpoints[2].DownSince = clk.now().Add(-12 * time.Second)
	want := "eps 2/3 up, down: http://u:xxxxx@c:8000/v1 12s"
	if got := formatLine(snap, nil, nil); !strings.HasSuffix(got, " | "+want) {
		t.Errorf("one down: line %q, want it to end in %q", got, want)
	}
	if got := barLine(snap, nil, nil, 160); !strings.Contains(got, want) {
		t.Errorf("one down, wide bar %q: want %q in it", got, want)
	}
	// Narrow: the short form, before the less important fields.
	if got := barLine(snap, nil, nil, 60); !strings.Contains(got, "eps 2/3 up") {
		t.Errorf("one down, narrow bar %q: want \"eps 2/3 up\" in it", got)
	}
	// Taken out for its answers: the line says why.
	snap.Endpoints[2].Reason = "20 of the last 20 attempts failed (http_500)"
	want = "eps 2/3 up, down: http://u:xxxxx@c:8000/v1 12s (20 of the last 20 attempts failed (http_500))"
	if got := formatLine(snap, nil, nil); !strings.HasSuffix(got, " | "+want) {
		t.Errorf("one taken out: line %q, want it to end in %q", got, want)
	}
}

// TestSelfMetricsPerEndpoint: with several endpoints --metrics-addr serves
// each one's series under the label endpoint (its URL, password masked);
// with one, none.
func TestSelfMetricsPerEndpoint(t *testing.T) {
	stats := runstats.NewStats(nil)
	stats.SetEndpoints([]string{wire.RedactURL("http://a:8000/v1"), wire.RedactURL("http://u:hunter2@b:8000/v1")})
	m, err := startSelfMetrics("127.0.0.1:0", stats, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	fams := scrapeSelf(t, m.URL())
	for _, ep := range []string{"http://a:8000/v1", "http://u:xxxxx@b:8000/v1"} {
		if v, ok := metricValue(fams, "synthgen_endpoint_up", "endpoint="+ep, "state=up"); !ok || v != 1 {
			t.Errorf("synthgen_endpoint_up{endpoint=%q,state=up} = %v (present %v), want 1", ep, v, ok)
		}
		for _, name := range []string{"synthgen_endpoint_requests_in_flight", "synthgen_endpoint_requests_total", "synthgen_endpoint_failures_total",
			"synthgen_endpoint_answers_total", "synthgen_endpoint_completion_tokens_total", "synthgen_endpoint_requests_per_second", "synthgen_endpoint_tokens_per_second"} {
			if _, ok := metricValue(fams, name, "endpoint="+ep); !ok {
				t.Errorf("%s{endpoint=%q} missing", name, ep)
			}
		}
	}
	for name, f := range fams {
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if strings.Contains(l.GetValue(), "hunter2") {
					t.Errorf("%s carries the password in label %s", name, l.GetName())
				}
			}
		}
	}

	single := runstats.NewStats(nil)
	single.SetEndpoints([]string{"http://a:8000/v1"})
	m1, err := startSelfMetrics("127.0.0.1:0", single, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	defer m1.Close()
	if _, ok := scrapeSelf(t, m1.URL())["synthgen_endpoint_up"]; ok {
		t.Error("one endpoint: per-endpoint series served")
	}
}

// TestReporterSumsEndpointServers: with several endpoints the reporter
// scrapes each one's /metrics; the line shows their sum, the JSON record
// (status.json's figures) the sum and each endpoint's own.
func TestReporterSumsEndpointServers(t *testing.T) {
	stats, _ := rampStats()
	stats.SetEndpoints([]string{"http://a:8000/v1", "http://b:8000/v1"})
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	replica := func(tokPerTenSec, running float64, kv float64) func(context.Context) (promscrape.Sample, error) {
		calls := 0
		return func(context.Context) (promscrape.Sample, error) {
			calls++
			at := base.Add(time.Duration(calls) * 10 * time.Second)
			return promscrape.Sample{At: at, GenerationTokens: float64(calls) * tokPerTenSec, Running: running, HasKV: true, KVCacheUsage: kv, HasPreemptions: true}, nil
		}
	}
	var status []runstats.ProgressRecord
	var buf bytes.Buffer
	rep := newReporter(&buf, reporterOptions{
		ScrapeEach: []func(context.Context) (promscrape.Sample, error){replica(10000, 60, 0.25), replica(30000, 100, 0.75)},
		Status:     func(rec runstats.ProgressRecord, _ bool) { status = append(status, rec) },
	})
	d := drive(rep, stats)
	d.tick() // the second sample of each: rates
	d.stop()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	if last := lines[len(lines)-1]; !strings.Contains(last, "| server 4000 tok/s running 160 waiting 0 kv 50% preemptions 0") {
		t.Errorf("last line = %q, want the sum: 4000 tok/s, running 160, kv 50%%", last)
	}
	rec := status[len(status)-1]
	if rec.Server == nil || rec.Server.GenTokPerS != 4000 {
		t.Fatalf("record's server = %+v, want 4000 tok/s", rec.Server)
	}
	if len(rec.Endpoints) != 2 {
		t.Fatalf("record lists %d endpoints, want 2", len(rec.Endpoints))
	}
	for i, want := range []float64{1000, 3000} {
		if s := rec.Endpoints[i].Server; s == nil || s.GenTokPerS != want || s.URL != "" {
			t.Errorf("endpoint %d server = %+v, want %v tok/s", i+1, s, want)
		}
	}
	js, err := json.Marshal(rep.Record(stats.Snapshot()))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(js), `"endpoints":[{"url":"http://a:8000/v1","state":"up"`) {
		t.Errorf("final record = %s, want each endpoint with its url and state", js)
	}
}

// TestRunSeveralEndpoints: `synthgen run` with endpoint.base_url a list.
// The endpoint list is no part of the job: a resume with a replica added
// is not refused and asks only what is missing. report.json names the
// endpoints (passwords masked) and gives each one's figures, which add up
// to the run's.
func TestRunSeveralEndpoints(t *testing.T) {
	var urls []string
	var mocks []*mockserver.Server
	for range 3 {
		m, u := cliMock(t, nil)
		mocks = append(mocks, m)
		urls = append(urls, u)
	}
	// A password in one URL reaches no file and no line.
	urls[2] = strings.Replace(urls[2], "http://", "http://u:hunter2@", 1)
	cj := cliJob{baseURL: urls[0] + "," + urls[1], data: cliDataset(t, 60, 0), dir: filepath.Join(t.TempDir(), "out")}

	first := cliRun(t, cj.args("--dataset.limit", "30")...)
	first.ok(t, "two endpoints")
	cj.baseURL = strings.Join(urls, ",")
	second := cliRun(t, cj.args("--quiet=false")...) // the start lines
	second.ok(t, "three endpoints, resumed")
	wantIDs(t, "records", cliRecords(t, cj.dir), idRange(0, 60)...)
	if !strings.Contains(second.stderr, "resuming: 30 records") {
		t.Errorf("the second run did not resume the first's 30 records:\n%s", second.stderr)
	}
	if mocks[2].Stats().Completed == 0 {
		t.Error("the replica added on resume answered nothing")
	}

	for _, name := range []string{reportFile, statusFile, "manifest.json"} {
		b, err := os.ReadFile(filepath.Join(cj.dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(b), "hunter2") {
			t.Errorf("%s holds the password", name)
		}
	}
	if strings.Contains(second.stderr+second.stdout, "hunter2") {
		t.Errorf("the run printed the password:\n%s", second.stderr)
	}
	b, err := os.ReadFile(filepath.Join(cj.dir, reportFile))
	if err != nil {
		t.Fatal(err)
	}
	var rep runfiles.ReportRecord
	if err := json.Unmarshal(b, &rep); err != nil {
		t.Fatal(err)
	}
	shown := []string{urls[0], urls[1], wire.RedactURL(urls[2])}
	if want := strings.Join(shown, ","); rep.Config.BaseURL != want {
		t.Errorf("report.json config.base_url = %q, want %q", rep.Config.BaseURL, want)
	}
	if len(rep.Endpoints) != 3 {
		t.Fatalf("report.json lists %d endpoints, want 3:\n%s", len(rep.Endpoints), b)
	}
	var completed int64
	for i, e := range rep.Endpoints {
		if e.URL != shown[i] || e.State != runstats.EndpointUp || e.InFlight != 0 {
			t.Errorf("endpoint %d: %+v; want url %q, up, none in flight", i+1, e, shown[i])
		}
		completed += e.Completed
	}
	if completed != 30 {
		t.Errorf("the endpoints completed %d answers, want the 30 the second run asked", completed)
	}
}

// TestRunEndpointsModelCheck: every endpoint must serve the model, and an
// endpoint that is down at start does not stop the others.
func TestRunEndpointsModelCheck(t *testing.T) {
	_, a := cliMock(t, nil)
	other := httptest.NewServer(mockserver.New(mockserver.Options{Model: "other-model"}))
	t.Cleanup(other.Close)
	cj := cliJob{baseURL: a + "," + other.URL + "/v1", data: cliDataset(t, 10, 0), dir: filepath.Join(t.TempDir(), "out")}
	res := cliRun(t, cj.args()...)
	if res.err == nil {
		t.Fatal("two endpoints serving different models: the run went on")
	}
	if msg := res.err.Error(); !strings.Contains(msg, other.URL) || !strings.Contains(msg, "other-model") {
		t.Errorf("error %q does not name the endpoint and the model it serves", msg)
	}

	// A port nothing listens on: closed at once, before the run.
	gone := httptest.NewServer(http.NotFoundHandler())
	goneURL := gone.URL + "/v1"
	gone.Close()
	cj.baseURL = a + "," + goneURL
	res = cliRun(t, cj.args()...)
	res.ok(t, "one endpoint down at start")
	if !strings.Contains(res.stderr, "warning: endpoint "+goneURL+" does not answer") {
		t.Errorf("no warning naming the endpoint down at start:\n%s", res.stderr)
	}
	wantIDs(t, "records", cliRecords(t, cj.dir), idRange(0, 10)...)
}

// TestReporterLeavesOutAReplicaThatIsDown: with one of three replicas
// gone, the server's view is the sum of the two that answered their last
// scrape, and says so; the gone one's last rates are nowhere.
func TestReporterLeavesOutAReplicaThatIsDown(t *testing.T) {
	stats, _ := rampStats()
	stats.SetEndpoints([]string{"http://a:8000/v1", "http://b:8000/v1", "http://c:8000/v1"})
	base := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	replica := func(tokPerTenSec float64, diesAfter int) func(context.Context) (promscrape.Sample, error) {
		calls := 0
		return func(context.Context) (promscrape.Sample, error) {
			calls++
			if diesAfter > 0 && calls > diesAfter {
				return promscrape.Sample{}, errors.New("dial tcp: connection refused")
			}
			at := base.Add(time.Duration(calls) * 10 * time.Second)
			return promscrape.Sample{At: at, GenerationTokens: float64(calls) * tokPerTenSec, Running: 50}, nil
		}
	}
	var status []runstats.ProgressRecord
	var buf bytes.Buffer
	rep := newReporter(&buf, reporterOptions{
		ScrapeEach: []func(context.Context) (promscrape.Sample, error){replica(10000, 0), replica(20000, 0), replica(30000, 2)},
		Status:     func(rec runstats.ProgressRecord, _ bool) { status = append(status, rec) },
	})
	d := drive(rep, stats)
	d.tick() // every replica's second sample: 1000 + 2000 + 3000 tok/s
	d.tick() // c is gone
	d.tick() // received only once the tick before is handled
	d.stop()
	lines := strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\n")
	last := lines[len(lines)-1]
	if !strings.Contains(last, "| server 3000 tok/s running 100 ") || !strings.Contains(last, "(2 of 3 replicas)") {
		t.Errorf("last line = %q, want the two live replicas summed (3000 tok/s, running 100) and said: 2 of 3", last)
	}
	rec := status[len(status)-1]
	if rec.Server == nil || rec.Server.GenTokPerS != 3000 || rec.Server.ReplicasSummed != 2 || rec.Server.Replicas != 3 {
		t.Fatalf("record's server = %+v, want 3000 tok/s from 2 of 3 replicas", rec.Server)
	}
	if s := rec.Endpoints[2].Server; s != nil {
		t.Errorf("the gone replica's server = %+v, want none (its last rates are of a server that is gone)", s)
	}
}

// TestHangingMetricsHoldNoReader: a /metrics that answered once and then
// hangs does not hold its readers (the progress line): each gets the
// latest sample while the hanging scrape is under way, not the scrape's
// timeout, and the one scrape under way is not started again.
func TestHangingMetricsHoldNoReader(t *testing.T) {
	t.Parallel()
	m := mockserver.New(mockserver.Options{})
	release := make(chan struct{})
	var scrapes atomic.Int64
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if scrapes.Add(1) > 1 {
			<-release
		}
		m.ServeHTTP(w, r)
	}))
	t.Cleanup(ts.Close)
	t.Cleanup(func() { close(release) })
	sc := promscrape.NewScraper(ts.URL+"/metrics", nil)
	a := &asyncScrape{scrape: sc.Scrape}
	first, err := a.Scrape(context.Background())
	if err != nil || !first.HasRunning {
		t.Fatalf("first scrape: %+v, %v", first, err)
	}
	for i := range 3 {
		s, err := a.Scrape(context.Background())
		if err != nil || !s.At.Equal(first.At) {
			t.Fatalf("read %d while the scrape hangs: at %v, %v; want the first sample at once", i, s.At, err)
		}
	}
	if n := scrapes.Load(); n != 2 {
		t.Errorf("%d scrapes, want the first and the one hanging", n)
	}
}
