package main

import (
	"context"
	"encoding/json"
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
	"github.com/synthgen/synthgen/internal/promscrape"
	"github.com/synthgen/synthgen/internal/redact"
	"github.com/synthgen/synthgen/mockserver"
)

// TestSelfMetricsPerEndpoint: with several endpoints --metrics-addr serves
// each one's series under the label endpoint (its URL, password masked);
// with one, none.
func TestSelfMetricsPerEndpoint(t *testing.T) {
	stats := runstats.NewStats(nil)
	stats.SetEndpoints([]string{redact.URL("http://a:8000/v1"), redact.URL("http://u:hunter2@b:8000/v1")})
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
	shown := []string{urls[0], urls[1], redact.URL(urls[2])}
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
	t.Parallel()
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
	read := func(i int) {
		s, err := a.Scrape(context.Background())
		if err != nil || !s.At.Equal(first.At) {
			t.Fatalf("read %d while the scrape hangs: at %v, %v; want the first sample at once", i, s.At, err)
		}
	}
	read(0)
	// The scrape the read started reaches the server when the scheduler
	// lets it (a loaded machine is slow to); then more reads must not
	// start another.
	deadline := time.Now().Add(time.Minute) // a bound for a failure, not a wait
	for scrapes.Load() < 2 {
		if time.Now().After(deadline) {
			t.Fatal("the second scrape never reached the server")
		}
		time.Sleep(5 * time.Millisecond)
	}
	for i := 1; i <= 3; i++ {
		read(i)
	}
	if n := scrapes.Load(); n != 2 {
		t.Errorf("%d scrapes, want the first and the one hanging", n)
	}
}
