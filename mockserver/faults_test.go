package mockserver

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"math"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// send posts one request and returns its status, headers and body, or the
// transport's error (a reset) when there is no status or no whole body.
func send(t *testing.T, url string, stream bool) (int, http.Header, []byte, error) {
	t.Helper()
	b, _ := json.Marshal(map[string]any{"messages": userMessages("fault me"), "stream": stream, "max_tokens": 50})
	req, err := http.NewRequest(http.MethodPost, url+"/v1/chat/completions", bytes.NewReader(b))
	if err != nil {
		t.Fatal(err)
	}
	// A fresh connection each time: a reset must not spill into the next request.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body, err
}

// TestFaultKinds: each --rate-* at 1 makes every request fail its way,
// plain and streamed, and Stats and /metrics count it by kind.
func TestFaultKinds(t *testing.T) {
	cases := []struct {
		kind  string
		set   func(*Options)
		check func(t *testing.T, stream bool, status int, h http.Header, body []byte, err error)
	}{
		{Fault429, func(o *Options) { o.Rate429, o.RetryAfter = 1, 250*time.Millisecond },
			func(t *testing.T, _ bool, status int, h http.Header, _ []byte, err error) {
				if err != nil || status != 429 || h.Get("Retry-After") != "0.25" {
					t.Errorf("status %d, Retry-After %q, err %v; want 429 and 0.25", status, h.Get("Retry-After"), err)
				}
			}},
		{Fault500, func(o *Options) { o.Rate500 = 1 }, wantStatus(500)},
		{Fault503, func(o *Options) { o.Rate503 = 1 }, wantStatus(503)},
		{FaultReset, func(o *Options) { o.RateReset = 1 }, wantErr},
		{FaultResetMid, func(o *Options) { o.RateResetMid = 1 }, wantErr},
		{FaultBadChunk, func(o *Options) { o.RateBadChunk = 1 },
			func(t *testing.T, stream bool, status int, _ http.Header, body []byte, err error) {
				if err != nil || status != 200 {
					t.Fatalf("status %d, err %v", status, err)
				}
				if stream && !bytes.Contains(body, []byte(`"delta":{"content":"tr`+"\n\n")) {
					t.Errorf("no malformed chunk in %q", body)
				}
				if !stream && json.Valid(body) {
					t.Errorf("a plain bad chunk is valid JSON: %q", body)
				}
			}},
		{FaultCut, func(o *Options) { o.RateCut = 1 },
			func(t *testing.T, stream bool, status int, _ http.Header, body []byte, err error) {
				if err != nil || status != 200 || bytes.Contains(body, []byte(`"finish_reason":"`)) {
					t.Errorf("status %d, err %v, body %q: want 200 without a finish_reason", status, err, body)
				}
				if stream && !bytes.HasSuffix(body, doneFrame) {
					t.Errorf("a cut stream does not end with [DONE]: %q", body)
				}
			}},
		{FaultGarbage, func(o *Options) { o.RateGarbage = 1 },
			func(t *testing.T, _ bool, status int, h http.Header, body []byte, err error) {
				if err != nil || status != 200 || json.Valid(body) || !strings.HasPrefix(h.Get("Content-Type"), "text/html") {
					t.Errorf("status %d, type %q, err %v, body %q: want a 200 HTML page", status, h.Get("Content-Type"), err, body)
				}
			}},
		{FaultLength, func(o *Options) { o.RateLength = 1 },
			func(t *testing.T, stream bool, status int, _ http.Header, body []byte, err error) {
				if err != nil || status != 200 || !bytes.Contains(body, []byte(`"finish_reason":"length"`)) {
					t.Errorf("status %d, err %v, body %q: want finish_reason length", status, err, body)
				}
				if !stream && !bytes.Contains(body, []byte(`"completion_tokens":50`)) {
					t.Errorf("a length answer is not max_tokens long: %q", body)
				}
			}},
	}
	for _, c := range cases {
		t.Run(c.kind, func(t *testing.T) {
			opts := Options{MeanTokens: 10, Seed: 3}
			c.set(&opts)
			s, ts := start(t, opts)
			for _, stream := range []bool{false, true} {
				status, h, body, err := send(t, ts.URL, stream)
				c.check(t, stream, status, h, body, err)
			}
			waitFor(t, "the mock idle", func() bool {
				st := s.Stats()
				return st.Running == 0 && st.Completed+st.Aborted+st.Faulted == st.Requests
			})
			st := s.Stats()
			for _, k := range FaultKinds() {
				want := int64(0)
				if k == c.kind {
					want = 2
				}
				if st.Injected[k] != want {
					t.Errorf("Injected[%s] = %d, want %d (%+v)", k, st.Injected[k], want, st)
				}
			}
			if got := scrape(t, ts.URL)["mock_faults_injected_total{"+c.kind+"}"]; got != 2 {
				t.Errorf("/metrics counts %v %s faults, want 2", got, c.kind)
			}
			wantFaulted := int64(2)
			if c.kind == FaultLength {
				wantFaulted = 0
			}
			if st.Faulted != wantFaulted || st.Aborted != 0 {
				t.Errorf("faulted %d aborted %d, want %d and 0", st.Faulted, st.Aborted, wantFaulted)
			}
		})
	}
}

func wantStatus(code int) func(t *testing.T, _ bool, status int, _ http.Header, _ []byte, err error) {
	return func(t *testing.T, _ bool, status int, _ http.Header, _ []byte, err error) {
		if err != nil || status != code {
			t.Errorf("status %d, err %v; want %d", status, err, code)
		}
	}
}

func wantErr(t *testing.T, _ bool, status int, _ http.Header, body []byte, err error) {
	if err == nil {
		t.Errorf("status %d, body %q: want the connection reset", status, body)
	}
}

// TestFaultDraw: which request gets which fault depends only on the seed
// and its arrival number, and the shares follow the rates.
func TestFaultDraw(t *testing.T) {
	opts := Options{Seed: 11, Rate429: 0.1, Rate500: 0.05, RateCut: 0.2, RateLength: 0.05}
	a, b := New(opts), New(opts)
	opts.Seed++
	c := New(opts)
	const n = 20000
	counts := map[string]int{}
	differ := 0
	for id := uint64(1); id <= n; id++ {
		k := a.fault(id)
		if k != b.fault(id) {
			t.Fatalf("request %d: %q then %q with the same seed", id, k, b.fault(id))
		}
		if k != c.fault(id) {
			differ++
		}
		counts[k]++
	}
	if differ == 0 {
		t.Errorf("another seed drew the same faults")
	}
	// Binomial: n*p within 5 standard deviations.
	for k, p := range map[string]float64{Fault429: 0.1, Fault500: 0.05, FaultCut: 0.2, FaultLength: 0.05, "": 0.6} {
		mean, sd := n*p, math.Sqrt(n*p*(1-p))
		if d := float64(counts[k]) - mean; d > 5*sd || d < -5*sd {
			t.Errorf("%q: %d of %d, want about %.0f", k, counts[k], n, mean)
		}
	}
	if err := (Options{Rate500: 0.6, Rate503: 0.6}).Validate(); err == nil {
		t.Errorf("rates adding up to 1.2 pass Validate")
	}
	if err := (Options{RateCut: -0.1}).Validate(); err == nil {
		t.Errorf("a negative rate passes Validate")
	}
}

// TestServeRestart: with RestartEvery, Serve cuts the request that makes
// the count, keeps the port closed, then serves again on the same address.
func TestServeRestart(t *testing.T) {
	s := New(Options{MeanTokens: 5, RestartEvery: 2, RestartFor: 50 * time.Millisecond})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	url := "http://" + ln.Addr().String()
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- s.Serve(ctx, ln, time.Second) }()
	defer func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	}()
	if status, _, _, err := send(t, url, false); err != nil || status != 200 {
		t.Fatalf("first request: %d %v", status, err)
	}
	// The second request triggers the restart: it is cut or answered just
	// before the listener closes. Requests then succeed again once the
	// port is back.
	_, _, _, _ = send(t, url, true)
	waitFor(t, "the restart", func() bool { return s.Stats().Injected[FaultRestart] == 1 })
	waitFor(t, "the port back", func() bool {
		status, _, _, err := send(t, url, false)
		return err == nil && status == 200
	})
}
