// Package held is the mock's batch model stepped on a clock its caller
// advances, for tests of concurrency: auto that must not judge a knee by the
// CPU they happen to get. It is apart from mockserver because it shares
// nothing with the HTTP server but the model: no chat answers, no real
// time, no faults.
//
// Its throughput is a function of the requests the client holds in it, and
// nothing else: each batch step every running request makes one token and
// the step takes TokenDelay x (1 + running/BatchScale) of the caller's
// time, under the same admission, KV budget and recompute preemption as
// the HTTP server's batch model (mockserver's batch.go). The same options
// give the same counts, on any machine.
//
// It serves vLLM's /metrics over HTTP (the gauges and counters a
// Controller reads), so a test scrapes it as a run does; the client's own
// counts, which a run takes from its answers, are Counts.
package held

import (
	"math/rand/v2"
	"net/http"
	"slices"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configure a Server; zero fields take the defaults.
type Options struct {
	Prompt     int           // prompt tokens of every request: default 400
	MinTokens  int           // shortest answer: default MaxTokens*2/3
	MaxTokens  int           // longest answer: default 24
	TokenDelay time.Duration // a token's time in a batch of one: default 40ms
	BatchScale int           // a step takes TokenDelay x (1 + running/BatchScale): default 400
	KVBudget   int           // KV cache in tokens; 0: no budget (no knee from the cache)
	MaxRunning int           // most running at once; 0: no count limit
	Requests   int           // requests the client has to send; 0: no end
	// CountTokensAtEnd: vllm:generation_tokens_total moves only when a
	// request ends, and is absent before the first end (as
	// mockserver's Options.CountTokensAtEnd).
	CountTokensAtEnd bool
	Seed             uint64 // the answers' lengths
}

// Counts are what the client counted of a Server's answers, and what
// the server did.
type Counts struct {
	Sent        int     // requests the client sent
	InFlight    int     // sent and not answered
	Answers     int     // answers ended
	Streamed    float64 // tokens the client received, as they came
	AtEnd       float64 // tokens of the answers ended (a plain request's count)
	Preemptions int
	Recomputed  int // tokens generated again after a preemption
}

// Server is a batch-model server on the caller's clock; safe for
// concurrent use.
type Server struct {
	o        Options
	registry *prometheus.Registry

	mu      sync.Mutex
	rng     *rand.Rand
	running []*heldSeq // in admission order: the last is the newest
	waiting []*heldSeq // FIFO; a preempted request goes to the front
	used    int        // KV tokens held by the running requests
	due     time.Duration
	c       Counts
	serverT float64 // vllm:generation_tokens_total
}

// heldSeq is one request in a Server.
type heldSeq struct {
	length int // tokens of its answer
	sent   int // tokens the client has
	redo   int // tokens to generate again before the next is sent (a preemption lost them)
	kv     int
}

// New returns a Server with nothing in flight.
func New(o Options) *Server {
	if o.Prompt <= 0 {
		o.Prompt = 400
	}
	if o.MaxTokens <= 0 {
		o.MaxTokens = 24
	}
	if o.MinTokens <= 0 || o.MinTokens > o.MaxTokens {
		o.MinTokens = max(1, o.MaxTokens*2/3)
	}
	if o.TokenDelay <= 0 {
		o.TokenDelay = 40 * time.Millisecond
	}
	if o.BatchScale <= 0 {
		o.BatchScale = 400
	}
	h := &Server{o: o, rng: rand.New(rand.NewPCG(o.Seed, 1))}
	h.register()
	return h
}

// Advance runs the server for d of the caller's time with the client
// holding up to hold requests in it: whenever fewer are in flight (and
// Requests allows) it sends another at once, as a pool does; with more in
// flight (the limit went down) it waits for answers.
func (h *Server) Advance(hold int, d time.Duration) {
	h.mu.Lock()
	defer h.mu.Unlock()
	end := h.due + d
	for {
		h.fill(hold)
		if len(h.running) == 0 {
			h.due = end // nothing to do until the client sends again
			return
		}
		step := h.o.TokenDelay + h.o.TokenDelay*time.Duration(len(h.running))/time.Duration(h.o.BatchScale)
		if h.due+step > end {
			return // the step ends after d: the next Advance makes it
		}
		h.due += step
		h.step()
	}
}

// fill sends requests up to hold in flight and admits who fits. h.mu is held.
func (h *Server) fill(hold int) {
	for h.c.InFlight < hold && (h.o.Requests == 0 || h.c.Sent < h.o.Requests) {
		n := h.o.MinTokens + h.rng.IntN(h.o.MaxTokens-h.o.MinTokens+1)
		h.waiting = append(h.waiting, &heldSeq{length: n})
		h.c.Sent++
		h.c.InFlight++
	}
	for len(h.waiting) > 0 {
		q := h.waiting[0]
		if h.o.MaxRunning > 0 && len(h.running) >= h.o.MaxRunning {
			break
		}
		if h.o.KVBudget > 0 && len(h.running) > 0 && h.used+h.o.Prompt > h.o.KVBudget {
			break
		}
		h.waiting = h.waiting[1:]
		q.kv, q.redo = h.o.Prompt, q.sent
		h.running = append(h.running, q)
		h.used += q.kv
	}
}

// step is one batch step: every running request makes a token, in
// admission order, the newest preempted while the cache is over budget
// (as mockserver's batch.grow). h.mu is held.
func (h *Server) step() {
	for i := 0; i < len(h.running); i++ {
		q := h.running[i]
		q.kv++
		h.used++
		if q.redo > 0 {
			q.redo--
			h.c.Recomputed++
		} else {
			q.sent++
			h.c.Streamed++
			if !h.o.CountTokensAtEnd {
				h.serverT++
			}
		}
		for h.o.KVBudget > 0 && h.used > h.o.KVBudget && len(h.running) > 1 {
			v := h.running[len(h.running)-1]
			h.running = h.running[:len(h.running)-1]
			h.used -= v.kv
			h.waiting = slices.Insert(h.waiting, 0, v)
			h.c.Preemptions++
		}
		if i >= len(h.running) || h.running[i] != q {
			break // q itself was preempted: so were all after it
		}
	}
	// The answers that are whole end.
	h.running = slices.DeleteFunc(h.running, func(q *heldSeq) bool {
		if q.sent < q.length {
			return false
		}
		h.used -= q.kv
		h.c.InFlight--
		h.c.Answers++
		h.c.AtEnd += float64(q.length)
		if h.o.CountTokensAtEnd {
			h.serverT += float64(q.length)
		}
		return true
	})
}

// Counts returns the client's counts and the server's.
func (h *Server) Counts() Counts {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.c
}

// ServeHTTP serves /metrics in vLLM's text format.
func (h *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/metrics" {
		http.NotFound(w, r)
		return
	}
	promhttp.HandlerFor(h.registry, promhttp.HandlerOpts{}).ServeHTTP(w, r)
}

// register exposes the gauges and counters under vLLM's names.
func (h *Server) register() {
	labels := prometheus.Labels{"model_name": "mock-model", "engine": "0"}
	read := func(f func() float64) func() float64 {
		return func() float64 {
			h.mu.Lock()
			defer h.mu.Unlock()
			return f()
		}
	}
	gauge := func(name string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: name, ConstLabels: labels}, read(f))
	}
	counter := func(name string, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: name, ConstLabels: labels}, read(f))
	}
	h.registry = prometheus.NewRegistry()
	h.registry.MustRegister(
		gauge("vllm:num_requests_running", func() float64 { return float64(len(h.running)) }),
		gauge("vllm:num_requests_waiting", func() float64 { return float64(len(h.waiting)) }),
		gauge("vllm:kv_cache_usage_perc", func() float64 {
			if h.o.KVBudget == 0 {
				return 0
			}
			return min(float64(h.used)/float64(h.o.KVBudget), 1)
		}),
		counter("vllm:num_preemptions_total", func() float64 { return float64(h.c.Preemptions) }),
	)
	tokens := counter("vllm:generation_tokens_total", func() float64 { return h.serverT })
	if h.o.CountTokensAtEnd {
		// No counter before the first end, as llm-d-inference-sim.
		tokens = afterFirstEnd{tokens, h}
	}
	h.registry.MustRegister(tokens)
}

// afterFirstEnd collects its Collector once an answer of h has ended.
type afterFirstEnd struct {
	prometheus.Collector
	h *Server
}

func (a afterFirstEnd) Collect(ch chan<- prometheus.Metric) {
	a.h.mu.Lock()
	ended := a.h.c.Answers > 0
	a.h.mu.Unlock()
	if ended {
		a.Collector.Collect(ch)
	}
}
