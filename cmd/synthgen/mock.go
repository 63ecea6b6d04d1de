package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/internal/mockserver"
)

// newMockCmd is `synthgen mock`: the built-in vLLM-like server, for trying
// synthgen without a GPU and for load tests on loopback.
func newMockCmd() *cobra.Command {
	var (
		addr  string
		grace time.Duration
		opts  mockserver.Options
	)
	cmd := &cobra.Command{
		Use:   "mock",
		Short: "Serve a vLLM-like OpenAI-compatible mock server (no GPU needed)",
		Long: `mock serves /v1/models, /v1/chat/completions (plain and streamed, with
reasoning and content in vLLM's shapes) and a Prometheus /metrics with vLLM's
metric names. Answers are word pieces with long-tailed lengths that depend only
on --seed and the prompt, so a retried or resumed request gets the same answer.
It serves --max-running requests at once and queues the rest, like vLLM.
Stop it with Ctrl-C: requests in flight get --grace to finish.`,
		Example: `  synthgen mock --token-delay 20ms --ttft 300ms --max-running 64
  synthgen run --endpoint.base_url http://127.0.0.1:8000/v1 ...`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := opts.Validate(); err != nil {
				return usageError(err, "see 'synthgen mock --help'")
			}
			ctx := cmd.Context()
			if ctx == nil {
				ctx = context.Background()
			}
			ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return serveMock(ctx, addr, grace, opts, cmd.ErrOrStderr())
		},
	}
	f := cmd.Flags()
	f.StringVar(&addr, "addr", "127.0.0.1:8000", "HOST:PORT to listen on (loopback by default; port 0 picks a free one)")
	f.StringVar(&opts.Model, "model", mockserver.DefaultModel, "model name served in /v1/models and checked in requests")
	f.StringVar(&opts.ReasoningField, "reasoning-field", mockserver.FieldReasoning,
		"where the reasoning goes: reasoning (vLLM >= 0.11), reasoning_content (older vLLM, SGLang), both, or none (no reasoning parser: the thought inside content, in <think> tags)")
	f.DurationVar(&opts.TokenDelay, "token-delay", 0, "time per generated token (0: as fast as possible)")
	f.DurationVar(&opts.TTFT, "ttft", 0, "time to first token once a request runs")
	f.IntVar(&opts.MeanTokens, "mean-tokens", mockserver.DefaultMeanTokens, "mean answer length in tokens (long-tailed, capped by max_tokens)")
	f.IntVar(&opts.MaxRunning, "max-running", 0, "requests served at once; the rest wait in a FIFO queue (0: unlimited)")
	f.Int64Var(&opts.Seed, "seed", 0, "seed of the answers: same seed and prompt, same answer")
	f.Float64Var(&opts.StallRate, "stall-rate", 0, "share of requests (0 to 1) that stall on purpose: a stream sends --stall-after tokens, then holds the connection without a byte until the client goes away; a plain request never answers")
	f.IntVar(&opts.StallAfter, "stall-after", 0, "tokens a stalling stream sends before it goes silent")
	f.DurationVar(&grace, "grace", 5*time.Second, "on shutdown, how long requests in flight may take to finish")
	return cmd
}

// serveMock serves the mock on addr until ctx ends, then shuts down
// gracefully within grace.
func serveMock(ctx context.Context, addr string, grace time.Duration, opts mockserver.Options, stderr io.Writer) error {
	s := mockserver.New(opts)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("mock: listen: %w", err)
	}
	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	// The listener's address, not the flag: --addr :0 shows the port it got.
	fmt.Fprintf(stderr, "mock: serving %s on http://%s/v1\n", s.Options().Model, ln.Addr())

	select {
	case err := <-served:
		return fmt.Errorf("mock: serve: %w", err)
	case <-ctx.Done():
	}
	shutdownCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), grace)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil {
		// Requests still running after the grace period are cut.
		_ = srv.Close()
		if !errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("mock: shutdown: %w", err)
		}
	}
	if err := <-served; !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("mock: serve: %w", err)
	}
	return nil
}
