package promscrape

import "strings"

// Kind is the server a /metrics belongs to, told by the metric names it
// holds (or, for /v1/models, by its owned_by).
type Kind string

// The kinds of server whose metrics are read.
const (
	KindUnknown  Kind = "unknown"
	KindVLLM     Kind = "vllm"
	KindSGLang   Kind = "sglang"
	KindLlamaCpp Kind = "llamacpp" // llama.cpp's llama-server
)

// Name is the server's name as a person writes it: "vLLM", "SGLang",
// "llama.cpp"; "the server" when the kind is not known.
func (k Kind) Name() string {
	switch k {
	case KindVLLM:
		return "vLLM"
	case KindSGLang:
		return "SGLang"
	case KindLlamaCpp:
		return "llama.cpp"
	}
	return "the server"
}

// Known reports whether k is one of the kinds read.
func (k Kind) Known() bool { return k == KindVLLM || k == KindSGLang || k == KindLlamaCpp }

// KindOf is the kind an OpenAI /v1/models entry's owned_by names: each of
// the three servers writes its own name there ("vllm", "sglang",
// "llamacpp"); anything else (a gateway, OpenAI's "system") is unknown.
func KindOf(ownedBy string) Kind {
	switch k := Kind(strings.ToLower(strings.TrimSpace(ownedBy))); k {
	case KindVLLM, KindSGLang, KindLlamaCpp:
		return k
	}
	return KindUnknown
}

// The vLLM metric names read. Counters are looked up with and without their
// `_total` suffix: the Python client exposes `name_total`, other exporters
// the bare family name.
const (
	MetricGenerationTokens = "vllm:generation_tokens_total"
	MetricPromptTokens     = "vllm:prompt_tokens_total"
	MetricRunning          = "vllm:num_requests_running"
	MetricWaiting          = "vllm:num_requests_waiting"
	MetricKVCacheUsage     = "vllm:kv_cache_usage_perc"
	MetricGPUCacheUsage    = "vllm:gpu_cache_usage_perc" // before vLLM V1 renamed it
	MetricPreemptions      = "vllm:num_preemptions_total"
	MetricSpecDrafts       = "vllm:spec_decode_num_drafts_total"
	MetricSpecDraftTokens  = "vllm:spec_decode_num_draft_tokens_total"
	MetricSpecAccepted     = "vllm:spec_decode_num_accepted_tokens_total"
	// Automatic prefix caching, in prompt tokens: those looked up in the
	// cache and those found there (vLLM V1).
	MetricPrefixQueries = "vllm:prefix_cache_queries_total"
	MetricPrefixHits    = "vllm:prefix_cache_hits_total"
)

// SGLang's names (python/sglang/srt/metrics/collector.py; the server
// serves them only when started with --enable-metrics). Its token counters
// grow when a request ends, not as tokens are made. Its preemption is a
// retraction: the counter is in newer versions only. Speculative decoding
// is two gauges over the last batches, not counters.
const (
	MetricSGLangGenerationTokens = "sglang:generation_tokens_total"
	MetricSGLangPromptTokens     = "sglang:prompt_tokens_total"
	MetricSGLangRunning          = "sglang:num_running_reqs"
	MetricSGLangWaiting          = "sglang:num_queue_reqs"
	MetricSGLangTokenUsage       = "sglang:token_usage" // the KV pool's share in use, 0..1
	MetricSGLangRetracted        = "sglang:num_retracted_requests_total"
	MetricSGLangSpecAcceptRate   = "sglang:spec_accept_rate"
	MetricSGLangSpecAcceptLength = "sglang:spec_accept_length"
	MetricSGLangCacheHitRate     = "sglang:cache_hit_rate" // the radix cache's hit rate over recent batches, 0..1
)

// llama.cpp's names (llama-server, served only when started with
// --metrics). Its counters grow when a request's prompt is processed and
// when it ends. It has no preemption counter; a KV-cache gauge only in
// older versions; speculative decoding counters only in newer ones.
const (
	MetricLlamaCppTokensPredicted = "llamacpp:tokens_predicted_total"
	MetricLlamaCppPromptTokens    = "llamacpp:prompt_tokens_total"
	MetricLlamaCppProcessing      = "llamacpp:requests_processing"
	MetricLlamaCppDeferred        = "llamacpp:requests_deferred"
	MetricLlamaCppKVCacheUsage    = "llamacpp:kv_cache_usage_ratio" // older versions
	MetricLlamaCppSpecDrafts      = "llamacpp:spec_decode_num_drafts_total"
	MetricLlamaCppSpecDraftTokens = "llamacpp:spec_decode_num_draft_tokens_total"
	MetricLlamaCppSpecAccepted    = "llamacpp:spec_decode_num_accepted_tokens_total"
)

// kindNames are the metric names one kind of server gives each figure of a
// Sample; "" where it has none.
type kindNames struct {
	kind                                      Kind
	generation, prompt, running, waiting      string
	kv                                        []string // the first found is read
	preemptions                               string
	specDrafts, specDraftTokens, specAccepted string // counters
	specRate, specLength                      string // gauges
	prefixQueries, prefixHits                 string // counters, in prompt tokens
	prefixRate                                string // a gauge, 0..1
}

// kindTable is every kind read, in the order a text is matched against
// them: the first kind with any of its names in the text is the server's.
var kindTable = []kindNames{
	{
		kind:       KindVLLM,
		generation: MetricGenerationTokens, prompt: MetricPromptTokens,
		running: MetricRunning, waiting: MetricWaiting,
		kv:          []string{MetricKVCacheUsage, MetricGPUCacheUsage},
		preemptions: MetricPreemptions,
		specDrafts:  MetricSpecDrafts, specDraftTokens: MetricSpecDraftTokens, specAccepted: MetricSpecAccepted,
		prefixQueries: MetricPrefixQueries, prefixHits: MetricPrefixHits,
	},
	{
		kind:       KindSGLang,
		generation: MetricSGLangGenerationTokens, prompt: MetricSGLangPromptTokens,
		running: MetricSGLangRunning, waiting: MetricSGLangWaiting,
		kv:          []string{MetricSGLangTokenUsage},
		preemptions: MetricSGLangRetracted,
		specRate:    MetricSGLangSpecAcceptRate, specLength: MetricSGLangSpecAcceptLength,
		prefixRate: MetricSGLangCacheHitRate,
	},
	{
		kind:       KindLlamaCpp,
		generation: MetricLlamaCppTokensPredicted, prompt: MetricLlamaCppPromptTokens,
		running: MetricLlamaCppProcessing, waiting: MetricLlamaCppDeferred,
		kv:         []string{MetricLlamaCppKVCacheUsage},
		specDrafts: MetricLlamaCppSpecDrafts, specDraftTokens: MetricLlamaCppSpecDraftTokens, specAccepted: MetricLlamaCppSpecAccepted,
	},
}

// names is every name of k's, "" left out.
func (k kindNames) names() []string {
	out := append([]string{k.generation, k.prompt, k.running, k.waiting, k.preemptions,
		k.specDrafts, k.specDraftTokens, k.specAccepted, k.specRate, k.specLength,
		k.prefixQueries, k.prefixHits, k.prefixRate}, k.kv...)
	n := 0
	for _, s := range out {
		if s != "" {
			out[n] = s
			n++
		}
	}
	return out[:n]
}
