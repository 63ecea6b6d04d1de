package main

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/synthgen/synthgen/mockserver"
)

// mockHelp is mock's --help.
const mockHelp = `mock serves /v1/models, /v1/chat/completions (plain and streamed, with
reasoning and content in vLLM's shapes) and a Prometheus /metrics with vLLM's
metric names. Answers are word pieces with long-tailed lengths that depend only
on --seed and the prompt, so a retried or resumed request gets the same answer.
Asked for return_token_ids and logprobs, it answers them as vLLM does: a
prompt id per word of the messages, an answer id per generated piece (as many
as usage.completion_tokens), deterministic logprobs; --ignore-token-ids makes
it a server that does not know return_token_ids.
It serves --max-running requests at once and queues the rest, like vLLM.
With --kv-budget and --batch-scale it models what gives a real server's
throughput a knee: a KV cache that preempts when full and steps that slow
down as the batch grows (see ARCHITECTURE.md, "The mock's batch model").
Stop it with Ctrl-C: requests in flight get --grace to finish.

To test a pipeline's error handling, the --rate-* flags make a share of the
requests fail on purpose (which ones depends only on --seed and the order of
arrival), and --restart-every/--restart-at take the whole server away for
--restart-for. /metrics counts what was injected in
mock_faults_injected_total{kind}.

Asked for a shape (response_format json_schema or json_object, or vLLM's
guided_json / structured_outputs.json), the answer's content is JSON valid for
the schema, after the reasoning; --rate-invalid-json makes a share of those
answers not valid, to test what a client does with them.

To act as llama.cpp does at the connection level: --headers-when-running
sends a queued stream no byte until it runs, --rate-close-after closes a
share of kept-alive connections after an answer (the client's next request
on one reads EOF), and --abandon-on-term makes SIGTERM stop listening at
once while queued requests are held open and silent for --grace, as an old
process does while a new one starts on the same port.

--flavor sglang or llamacpp makes it SGLang or llama.cpp's llama-server where
a client sees them differ: /metrics under their names (sglang:*, llamacpp:*),
/v1/models in their shapes (llama-server gives the context as meta.n_ctx),
and, with --max-model-len, llama-server's refusal of a prompt that fills the
context and its answers that stop with finish_reason length where prompt and
answer fill it. --no-metrics answers /metrics as a server whose metrics are
off (llama-server: 501 with the flag to add).

--rpm and --tpm make it a hosted endpoint that states its limits, as
OpenAI's API does: x-ratelimit-limit-, -remaining- and -reset-requests (and
-tokens) on every answer, and a 429 with retry-after past either.

/v1/files and /v1/batches are OpenAI's Files and Batch APIs: files kept in
memory, each batch validating, in_progress and finalizing for
--batch-validating, --batch-in-progress and --batch-finalizing before it
completes, every line answered as /v1/chat/completions answers it (not
streamed), --batch-fail-rate of the lines into the error file;
--batch-fail-validation N fails the first N batches in validation.`

// newMockCmd is `synthgen mock`: the built-in vLLM-like server, for trying
// synthgen without a GPU and for load tests on loopback.
func newMockCmd() *cobra.Command {
	var (
		listen        mockListen
		grace         time.Duration
		abandonOnTerm bool
		opts          mockserver.Options
	)
	cmd := &cobra.Command{
		Use:   "mock",
		Short: "Serve a vLLM-like OpenAI-compatible mock server (no GPU needed)",
		Long:  mockHelp,
		Example: `  synthgen mock --token-delay 20ms --ttft 300ms --max-running 64
  synthgen mock --token-delay 4ms --batch-scale 100 --max-running 256 --kv-budget 44800
  synthgen mock --rate-429 0.05 --retry-after 2s --rate-500 0.02 --rate-reset-mid 0.01 --restart-at 5m --restart-for 30s
  synthgen mock --max-running 4 --headers-when-running --rate-close-after 0.3 --abandon-on-term --grace 30s
  synthgen mock --flavor llamacpp --max-model-len 4096
  synthgen mock --rpm 600 --tpm 200000 --no-metrics
  synthgen run --endpoint.base_url http://127.0.0.1:8000/v1 ...`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return usageError(err, "see 'synthgen mock --help'")
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			var term chan os.Signal
			stopSigs := []os.Signal{os.Interrupt, syscall.SIGTERM}
			if abandonOnTerm {
				// SIGTERM abandons (see serveMock); Ctrl-C still stops.
				term = make(chan os.Signal, 1)
				signal.Notify(term, syscall.SIGTERM)
				defer signal.Stop(term)
				stopSigs = stopSigs[:1]
			}
			ctx, stop := signal.NotifyContext(ctx, stopSigs...)
			defer stop()
			return serveMock(ctx, listen, grace, opts, term, cmd.ErrOrStderr())
		},
	}
	mockFlags(cmd.Flags(), &listen, &grace, &abandonOnTerm, &opts)
	return cmd
}

// mockFlags declares mock's flags: the server's options, where it
// listens and how it stops.
func mockFlags(f *pflag.FlagSet, listen *mockListen, grace *time.Duration, abandonOnTerm *bool, opts *mockserver.Options) {
	f.StringVar(&listen.addr, "addr", "127.0.0.1:8000", "HOST:PORT to listen on (loopback by default; port 0 picks a free one)")
	f.StringVar(&listen.addrFile, "addr-file", "", "once listening, write the HOST:PORT it listens on to this file (written whole, by a rename; removed when the mock stops), so a script that gave --addr HOST:0 knows where to send; empty: none")
	f.StringVar(&opts.Model, "model", mockserver.DefaultModel, "model name served in /v1/models and checked in requests")
	f.StringVar(&opts.ReasoningField, "reasoning-field", mockserver.FieldReasoning,
		"where the reasoning goes: reasoning (vLLM >= 0.11), reasoning_content (older vLLM, SGLang), both, or none (no reasoning parser: the thought inside content, in <think> tags)")
	f.DurationVar(&opts.TokenDelay, "token-delay", 0, "time per generated token (0: as fast as possible)")
	f.DurationVar(&opts.TTFT, "ttft", 0, "time to first token once a request runs")
	f.IntVar(&opts.MeanTokens, "mean-tokens", mockserver.DefaultMeanTokens, "mean answer length in tokens (long-tailed, capped by max_tokens)")
	f.IntVar(&opts.MaxRunning, "max-running", 0, "requests served at once; the rest wait in a FIFO queue (0: unlimited)")
	f.IntVar(&opts.KVBudget, "kv-budget", 0, "KV cache in tokens (the batch model): a running request holds its prompt plus the tokens generated so far; a request is admitted only while its prompt fits, and past the budget the newest running request is preempted (vllm:num_preemptions_total), requeued at the front and redoes its work (0: no budget)")
	f.IntVar(&opts.BatchScale, "batch-scale", 0, "per-token time grows with the batch: --token-delay * (1 + running/N), so throughput rises and flattens with concurrency (0: the delay does not depend on the batch)")
	f.BoolVar(&opts.CountTokensAtEnd, "count-tokens-at-end", false, "add an answer's tokens to vllm:generation_tokens_total only when it is finished, and leave that series out of /metrics until the first one is (as llm-d-inference-sim does)")
	f.IntVar(&opts.MaxModelLen, "max-model-len", 0, "the model's context in tokens, as vLLM's: a request whose prompt tokens (its words) plus max_tokens exceed it gets vLLM's 400, and /v1/models reports it (0: no limit)")
	f.Int64Var(&opts.Seed, "seed", 0, "seed of the answers: same seed and prompt, same answer")
	f.Float64Var(&opts.StallRate, "stall-rate", 0, "share of requests (0 to 1) that stall on purpose: a stream sends --stall-after tokens, then holds the connection without a byte until the client goes away; a plain request never answers")
	f.IntVar(&opts.StallAfter, "stall-after", 0, "tokens a stalling stream sends before it goes silent")
	f.Float64Var(&opts.Rate429, "rate-429", 0, "share of requests (0 to 1) answered 429 with a Retry-After header (--retry-after)")
	f.DurationVar(&opts.RetryAfter, "retry-after", time.Second, "the Retry-After a 429 carries (sent in seconds, fractions allowed)")
	f.Float64Var(&opts.Rate500, "rate-500", 0, "share of requests answered 500 with vLLM's error body")
	f.Float64Var(&opts.Rate503, "rate-503", 0, "share of requests answered 503 with vLLM's error body")
	f.Float64Var(&opts.RateReset, "rate-reset", 0, "share of requests whose connection is reset (TCP RST) before any byte of the response")
	f.Float64Var(&opts.RateResetMid, "rate-reset-mid", 0, "share of requests whose connection is reset halfway through the answer")
	f.Float64Var(&opts.RateBadChunk, "rate-bad-chunk", 0, "share of requests that get a malformed JSON chunk halfway through the stream (plain: a 200 whose JSON stops halfway)")
	f.Float64Var(&opts.RateCut, "rate-cut", 0, "share of requests whose answer ends without a finish_reason (a stream: [DONE] halfway)")
	f.Float64Var(&opts.RateGarbage, "rate-garbage", 0, "share of requests answered 200 with an HTML page instead of JSON")
	f.Float64Var(&opts.RateLength, "rate-length", 0, "share of requests whose answer runs to max_tokens and ends with finish_reason length")
	f.Float64Var(&opts.RateInvalidJSON, "rate-invalid-json", 0, "share of answers to a request asking for a shape (response_format json_schema or json_object, guided_json) whose content is not valid for it: cut short, a required key missing or a value of the wrong type (an independent draw: which answers depends only on --seed and the order of arrival)")
	f.StringVar(&opts.HiddenStates.Dir, "hidden-states-dir", "", "act as vLLM with the extract_hidden_states method and its hidden-states connector: POST /v1/completions writes the prompt's hidden states (bf16 [T, layers, hidden] and token_ids) as safetensors under this directory behind a .lock left on disk, and every chat request writes the file of its prompt too (empty: off)")
	f.IntVar(&opts.HiddenStates.Layers, "hidden-states-layers", 4, "layers in each hidden-state file")
	f.IntVar(&opts.HiddenStates.Hidden, "hidden-states-size", 8, "hidden size in each hidden-state file")
	f.Float64Var(&opts.HiddenStates.RateMismatch, "hidden-states-rate-mismatch", 0, "share of hidden-state files whose token_ids differ from the prompt's in one place")
	f.Float64Var(&opts.HiddenStates.RateNaN, "hidden-states-rate-nan", 0, "share of hidden-state files holding a NaN")
	f.IntVar(&opts.RestartEvery, "restart-every", 0, "restart after every N requests: close the listener and every connection (requests in flight are cut) for --restart-for (0: never)")
	f.DurationVar(&opts.RestartAt, "restart-at", 0, "restart once, this long after start (0: never)")
	f.DurationVar(&opts.RestartFor, "restart-for", time.Second, "how long a restart keeps the port closed")
	f.BoolVar(&opts.HeadersWhenRunning, "headers-when-running", false, "send a queued stream no byte, not even its status line and headers, until it runs, as llama.cpp does (default: vLLM's way, headers as soon as it is accepted)")
	f.Float64Var(&opts.RateCloseAfter, "rate-close-after", 0, "share of complete answers (0 to 1) after which the kept-alive connection is closed without \"Connection: close\", as llama.cpp does with some: the client's next request on it reads EOF before any byte (which answers depends only on --seed and the order of arrival)")
	f.BoolVar(abandonOnTerm, "abandon-on-term", false, "on SIGTERM, stop listening at once (a new server may take the port) and hold every queued request's connection open without a byte for --grace while running requests go on, then exit, as an old llama.cpp process does; Ctrl-C (SIGINT) still stops gracefully, and exits at once while holding")
	f.IntVar(&opts.PrefixCache, "prefix-cache", 0, "keep a prefix cache of this many prompt prefixes (leading messages, LRU) and export vllm:prefix_cache_queries_total and vllm:prefix_cache_hits_total in tokens, as vLLM's automatic prefix caching; 0: none")
	f.IntVar(&opts.CachedTokens, "cached-tokens", 0, "say in every answer's usage that this many of its prompt tokens (at most all) were cached (prompt_tokens_details.cached_tokens, as OpenAI and vLLM with --enable-prompt-tokens-details); 0: the details are null")
	f.BoolVar(&opts.IgnoreTokenIDs, "ignore-token-ids", false, "answer without token ids although a request asks for them (return_token_ids), as a server that does not know the field (vLLM before 0.10.2); logprobs are still answered")
	f.BoolVar(&opts.IgnoreN, "ignore-n", false, "answer one choice whatever n a request asks for, as a server that does not know OpenAI's n; else n > 1 is answered with n choices of distinct contents (streamed with their index)")
	f.DurationVar(grace, "grace", 5*time.Second, "on shutdown, how long requests in flight may take to finish (with --abandon-on-term, how long a SIGTERM holds the queued requests)")
	f.StringVar(&opts.Flavor, "flavor", mockserver.FlavorVLLM, "the server to be like in /metrics names, /v1/models and the context refusal: vllm, sglang or llamacpp")
	f.IntVar(&opts.RPM, "rpm", 0, "requests per minute, as a hosted server limits them: a bucket of N refilled continuously over a minute, OpenAI's x-ratelimit-* headers on every answer, a 429 with retry-after and retry-after-ms past it (0: no limit)")
	f.IntVar(&opts.TPM, "tpm", 0, "tokens per minute, as --rpm; a request costs its prompt's tokens plus its max_tokens, counted at admission (0: no limit)")
	f.DurationVar(&opts.Batch.Validating, "batch-validating", time.Second, "how long a batch (/v1/batches) is validating")
	f.DurationVar(&opts.Batch.InProgress, "batch-in-progress", 10*time.Second, "how long a batch is in_progress; its request_counts grow in proportion")
	f.DurationVar(&opts.Batch.Finalizing, "batch-finalizing", time.Second, "how long a batch is finalizing (and a cancelled one cancelling)")
	f.Float64Var(&opts.Batch.FailShare, "batch-fail-rate", 0, "share of a batch's lines (0 to 1) answered 500 into its error file")
	f.IntVar(&opts.Batch.FailValidation, "batch-fail-validation", 0, "fail the first N batches created in validation, as if their first line were malformed")
	f.BoolVar(&opts.NoMetrics, "no-metrics", false, "answer /metrics as a server whose metrics are off (llamacpp: llama-server's 501; otherwise a 404)")
}

// mockListen is where the mock listens and where it says so.
type mockListen struct {
	addr     string // HOST:PORT; port 0 picks a free one
	addrFile string // "" or the file the bound HOST:PORT is written to
}

// serveMock serves the mock on l.addr until ctx ends, then shuts down
// gracefully within grace. A signal on term (nil: never) abandons the
// server instead (see mockserver.Server.Abandon): the port is closed at
// once and the queued requests are held silent until grace has passed or
// ctx ends, then everything is closed.
func serveMock(ctx context.Context, l mockListen, grace time.Duration, opts mockserver.Options, term <-chan os.Signal, stderr io.Writer) error {
	s := mockserver.New(opts)
	ln, err := net.Listen("tcp", l.addr)
	if err != nil {
		return fmt.Errorf("mock: listen: %w", err)
	}
	if l.addrFile != "" {
		// Only once the port is ours: a script waiting for the file then
		// sends to this mock and to no other process.
		if err := writeAddrFile(l.addrFile, ln.Addr().String()); err != nil {
			ln.Close()
			return fmt.Errorf("mock: --addr-file: %w", err)
		}
		defer os.Remove(l.addrFile)
	}
	// The listener's address, not the flag: --addr :0 shows the port it got.
	fmt.Fprintf(stderr, "mock: serving %s on http://%s/v1\n", s.Options().Model, ln.Addr())
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if term != nil {
		go func() {
			select {
			case <-term:
			case <-ctx.Done():
				return
			}
			s.Abandon()
			fmt.Fprintf(stderr, "mock: SIGTERM: stopped listening on %s; queued requests are held silent for %v, running ones go on\n", ln.Addr(), grace)
			t := time.NewTimer(grace)
			defer t.Stop()
			select {
			case <-t.C:
				cancel()
			case <-ctx.Done():
			}
		}()
	}
	return s.Serve(ctx, ln, grace)
}

// writeAddrFile writes addr and a newline to path by a rename, so that a
// reader polling for the file never sees half an address.
func writeAddrFile(path, addr string) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, []byte(addr+"\n"), 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}
