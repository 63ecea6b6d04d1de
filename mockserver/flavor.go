package mockserver

// Flavours: which server the mock is like where servers differ in ways a
// client must cope with: the names of /metrics, the shape of /v1/models
// (and where it says the context), and what a prompt too long for the
// context gets. Answers, their shapes and the faults are vLLM's in every
// flavour. The names and shapes are those of each server's source: SGLang's
// python/sglang/srt/metrics/collector.py and its ModelCard; llama.cpp's
// llama-server (tools/server).

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Flavor values (Options.Flavor).
const (
	FlavorVLLM     = "vllm"     // the default
	FlavorSGLang   = "sglang"   // sglang:* metrics, SGLang's /v1/models
	FlavorLlamaCpp = "llamacpp" // llamacpp:* metrics, llama-server's /v1/models (meta.n_ctx) and context refusal
)

// validFlavor reports whether f is a flavour ("" is the default).
func validFlavor(f string) bool {
	switch f {
	case "", FlavorVLLM, FlavorSGLang, FlavorLlamaCpp:
		return true
	}
	return false
}

// flavorMetrics is the GET /metrics handler of the flavour: vLLM's names
// (metrics.go), SGLang's or llama.cpp's, each read from the same counters;
// with Options.NoMetrics, what the server answers when its metrics are
// off.
func (s *Server) flavorMetrics() http.Handler {
	if s.opts.NoMetrics {
		return http.HandlerFunc(s.metricsOff)
	}
	switch s.opts.Flavor {
	case FlavorSGLang:
		return s.flavorRegistry(s.sglangCollectors())
	case FlavorLlamaCpp:
		return s.flavorRegistry(s.llamaCppCollectors())
	}
	return s.metricsHandler()
}

// flavorRegistry serves cs and the mock's own fault counter from a
// registry of their own.
func (s *Server) flavorRegistry(cs []prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(append(cs, s.faultsMetric)...)
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
}

// sglangCollectors are SGLang's names: the token counters labelled with
// the model, the scheduler's gauges with its place (one scheduler:
// tp_rank 0), the KV pool's share as token_usage, preemptions as
// retractions.
func (s *Server) sglangCollectors() []prometheus.Collector {
	model := prometheus.Labels{"model_name": s.opts.Model}
	sched := prometheus.Labels{"model_name": s.opts.Model, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0", "moe_ep_rank": "0"}
	counter := func(name, help string, labels prometheus.Labels, f func() float64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help, ConstLabels: labels}, f)
	}
	gauge := func(name, help string, f func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: name, Help: help, ConstLabels: sched}, f)
	}
	return []prometheus.Collector{
		counter("sglang:prompt_tokens_total", "Number of prefill tokens processed.", model, func() float64 { return float64(s.promptTokens.Load()) }),
		counter("sglang:generation_tokens_total", "Number of generation tokens processed.", model, func() float64 { return float64(s.genTokens.Load()) }),
		gauge("sglang:num_running_reqs", "The number of running requests.", func() float64 { return float64(s.running.Load()) }),
		gauge("sglang:num_queue_reqs", "The number of requests in the waiting queue.", func() float64 { return float64(s.waiting.Load()) }),
		gauge("sglang:token_usage", "The token usage.", s.kvCacheUsage),
		counter("sglang:num_retracted_requests_total", "Total number of retracted requests.", sched, func() float64 { return float64(s.preemptions()) }),
	}
}

// llamaCppCollectors are llama-server's names, without labels. It has no
// preemption counter, and its newer versions no KV-cache gauge.
func (s *Server) llamaCppCollectors() []prometheus.Collector {
	return []prometheus.Collector{
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "llamacpp:prompt_tokens_total", Help: "Number of prompt tokens processed."},
			func() float64 { return float64(s.promptTokens.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "llamacpp:tokens_predicted_total", Help: "Number of generation tokens processed."},
			func() float64 { return float64(s.genTokens.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llamacpp:requests_processing", Help: "Number of requests processing."},
			func() float64 { return float64(s.running.Load()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "llamacpp:requests_deferred", Help: "Number of requests deferred."},
			func() float64 { return float64(s.waiting.Load()) }),
	}
}

// metricsOffMessage is what llama-server started without --metrics
// answers on /metrics.
const metricsOffMessage = "This server does not support metrics endpoint. Start it with `--metrics`"

// metricsOff answers /metrics as a server whose metrics are off does:
// llama-server with its 501 and the flag to add; SGLang without
// --enable-metrics (and the vLLM flavour) with FastAPI's 404.
func (s *Server) metricsOff(w http.ResponseWriter, _ *http.Request) {
	if s.opts.Flavor == FlavorLlamaCpp {
		writeLlamaError(w, http.StatusNotImplemented, "not_supported_error", metricsOffMessage, nil)
		return
	}
	writeJSON(w, http.StatusNotFound, map[string]string{"detail": "Not Found"})
}

// writeLlamaError answers with llama-server's error shape:
// {"error":{"code":...,"message":...,"type":...}} and extra fields beside
// them.
func writeLlamaError(w http.ResponseWriter, code int, typ, msg string, extra map[string]any) {
	e := map[string]any{"code": code, "message": msg, "type": typ}
	for k, v := range extra {
		e[k] = v
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	writeJSON(w, code, map[string]any{"error": e})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, _ := json.Marshal(v) // maps of strings and numbers always marshal
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(code)
	_, _ = w.Write(b)
}

// flavorModels answers GET /v1/models for SGLang and llama.cpp; false for
// the vLLM flavour, which handleModels serves.
func (s *Server) flavorModels(w http.ResponseWriter) bool {
	ctx := cmp.Or(s.opts.MaxModelLen, maxTokenLimit)
	switch s.opts.Flavor {
	case FlavorSGLang:
		writeJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{map[string]any{
			"id": s.opts.Model, "object": "model", "created": s.created, "owned_by": "sglang",
			"root": s.opts.Model, "parent": nil, "max_model_len": ctx,
		}}})
		return true
	case FlavorLlamaCpp:
		// llama-server lists the model twice: Ollama's way (models) and
		// OpenAI's (data), whose meta gives one slot's context as n_ctx.
		writeJSON(w, http.StatusOK, map[string]any{
			"models": []any{map[string]any{
				"name": s.opts.Model, "model": s.opts.Model, "modified_at": "", "size": "", "digest": "",
				"type": "model", "description": "", "tags": []string{""}, "capabilities": []string{"completion"},
				"parameters": "", "details": map[string]any{"parent_model": "", "format": "gguf", "family": "",
					"families": []string{""}, "parameter_size": "", "quantization_level": ""},
			}},
			"object": "list",
			"data": []any{map[string]any{
				"id": s.opts.Model, "object": "model", "created": s.created, "owned_by": "llamacpp",
				"meta": map[string]any{"vocab_type": 2, "n_vocab": 151936, "n_ctx": ctx, "n_ctx_train": max(ctx, maxTokenLimit),
					"n_embd": 4096, "n_params": 8190735360, "size": 5027783488},
			}},
		})
		return true
	}
	return false
}

// refuseTooLong answers a request that cannot fit the model's context
// (Options.MaxModelLen) as the flavour's server does, and reports whether
// it did. vLLM (and the SGLang flavour) refuse a prompt plus max_tokens
// longer than the context; llama-server refuses only a prompt that fills
// its slot's context (n_ctx), with the sizes as fields of the error, and
// lets a long max_tokens run until the context is full (fitContext).
func (s *Server) refuseTooLong(w http.ResponseWriter, req *chatRequest) bool {
	if s.opts.Flavor == FlavorLlamaCpp {
		n, prompt := s.opts.MaxModelLen, req.promptTokens()
		if n <= 0 || prompt < n {
			return false
		}
		s.tooLong.Add(1)
		writeLlamaError(w, http.StatusBadRequest, "exceed_context_size_error",
			fmt.Sprintf("request (%d tokens) exceeds the available context size (%d tokens), try increasing it", prompt, n),
			map[string]any{"n_prompt_tokens": prompt, "n_ctx": n})
		return true
	}
	msg, long := s.contextRefusal(req)
	if long {
		s.tooLong.Add(1)
		writeError(w, http.StatusBadRequest, "BadRequestError", msg, "input_tokens")
	}
	return long
}

// fitContext ends an answer of the llama.cpp flavour where its slot's
// context is full: prompt plus answer reach n_ctx (Options.MaxModelLen),
// and the answer stops there with finish_reason length, shorter than
// max_tokens. The other flavours refused such a request already.
func (s *Server) fitContext(p *plan, prompt int) {
	n := s.opts.MaxModelLen
	if s.opts.Flavor != FlavorLlamaCpp || n <= 0 || prompt+p.total <= n {
		return
	}
	p.total, p.finish = max(n-prompt, 1), "length"
	p.reasoning = min(p.reasoning, max(p.total-1, 0))
}
