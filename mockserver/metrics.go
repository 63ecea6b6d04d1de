package mockserver

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// nominalCapacity is the number of sequences taken to fill the KV cache when
// MaxRunning is unlimited, so kv_cache_usage_perc still moves with load.
const nominalCapacity = 256

// registerMetrics exposes the server's counters under vLLM's metric names and
// labels. Token counters and gauges read the same atomics as Stats, so the
// two never disagree. Each Server has its own registry: two servers in one
// process (tests) do not collide.
func (s *Server) registerMetrics() {
	labels := prometheus.Labels{"model_name": s.opts.Model, "engine": "0"}
	s.registry = prometheus.NewRegistry()
	s.success = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "vllm:request_success_total",
		Help:        "Count of successfully processed requests.",
		ConstLabels: labels,
	}, []string{"finished_reason"})
	for _, reason := range []string{"stop", "length", "abort"} {
		s.success.WithLabelValues(reason) // vLLM exports every reason from the start
	}
	s.faultsMetric = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name:        "mock_faults_injected_total",
		Help:        "Faults the mock injected on purpose, by kind (not a vLLM metric).",
		ConstLabels: labels,
	}, []string{"kind"})
	for _, k := range FaultKinds() {
		s.faultsMetric.WithLabelValues(k)
	}
	s.registry.MustRegister(
		s.faultsMetric,
		s.afterFirstEnd(prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "vllm:generation_tokens_total",
			Help:        "Number of generation tokens processed.",
			ConstLabels: labels,
		}, func() float64 { return float64(s.genTokens.Load()) })),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "vllm:prompt_tokens_total",
			Help:        "Number of prefill tokens processed.",
			ConstLabels: labels,
		}, func() float64 { return float64(s.promptTokens.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "vllm:num_requests_running",
			Help:        "Number of requests in model execution batches.",
			ConstLabels: labels,
		}, func() float64 { return float64(s.running.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "vllm:num_requests_waiting",
			Help:        "Number of requests waiting to be processed.",
			ConstLabels: labels,
		}, func() float64 { return float64(s.waiting.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name:        "vllm:kv_cache_usage_perc",
			Help:        "KV-cache usage. 1 means 100 percent usage.",
			ConstLabels: labels,
		}, s.kvCacheUsage),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "vllm:num_preemptions_total",
			Help:        "Cumulative number of preemption from the engine.",
			ConstLabels: labels,
		}, func() float64 { return float64(s.preemptions()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "mock_requests_total",
			Help:        "Chat completion requests accepted, as Stats.Requests (not a vLLM metric).",
			ConstLabels: labels,
		}, func() float64 { return float64(s.requests.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Name:        "mock_recomputed_tokens_total",
			Help:        "Tokens generated again after a preemption (not a vLLM metric).",
			ConstLabels: labels,
		}, func() float64 { return float64(s.recomputed()) }),
		s.success,
	)
	if s.prefix != nil {
		s.registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "vllm:prefix_cache_queries_total",
				Help:        "Prefix cache queries, in terms of number of queried tokens.",
				ConstLabels: labels,
			}, func() float64 { q, _ := s.prefix.counts(); return float64(q) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{
				Name:        "vllm:prefix_cache_hits_total",
				Help:        "Prefix cache hits, in terms of number of cached tokens.",
				ConstLabels: labels,
			}, func() float64 { _, h := s.prefix.counts(); return float64(h) }),
		)
	}
}

func (s *Server) kvCacheUsage() float64 {
	if s.batch != nil && s.batch.budget > 0 {
		return s.batch.kvUsage()
	}
	capacity := float64(nominalCapacity)
	if s.opts.MaxRunning > 0 {
		capacity = float64(s.opts.MaxRunning)
	}
	return min(float64(s.running.Load())/capacity, 1)
}

func (s *Server) metricsHandler() http.Handler {
	return promhttp.HandlerFor(s.registry, promhttp.HandlerOpts{})
}
