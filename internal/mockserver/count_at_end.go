package mockserver

import "github.com/prometheus/client_golang/prometheus"

// afterFirstEnd is c, or under Options.CountTokensAtEnd c left out of
// /metrics until the first answer is finished: llm-d-inference-sim has no
// vllm:generation_tokens_total until then.
func (s *Server) afterFirstEnd(c prometheus.Collector) prometheus.Collector {
	if !s.opts.CountTokensAtEnd {
		return c
	}
	return &untilFirstEnd{Collector: c, s: s}
}

type untilFirstEnd struct {
	prometheus.Collector
	s *Server
}

func (u *untilFirstEnd) Collect(ch chan<- prometheus.Metric) {
	if u.s.completed.Load() > 0 {
		u.Collector.Collect(ch)
	}
}
