package mockserver

import "github.com/prometheus/client_golang/prometheus"

// afterFirstEnd is c, or under Options.CountTokensAtEnd c left out of
// /metrics until the first answer is finished: llm-d-inference-sim has no
// vllm:generation_tokens_total until then.
func (s *Server) afterFirstEnd(c prometheus.Collector) prometheus.Collector {
	if !s.opts.CountTokensAtEnd {
		return c
	}
	return &untilFirstEnd{Collector: c, ended: func() bool { return s.completed.Load() > 0 }}
}

// untilFirstEnd collects its Collector once ended says an answer ended.
type untilFirstEnd struct {
	prometheus.Collector
	ended func() bool
}

func (u *untilFirstEnd) Collect(ch chan<- prometheus.Metric) {
	if u.ended() {
		u.Collector.Collect(ch)
	}
}
