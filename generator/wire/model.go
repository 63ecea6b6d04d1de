package wire

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/redact"
)

// ModelError is a model the server does not serve.
type ModelError struct {
	URL    string   // the /models URL asked, password masked
	Want   string   // endpoint.model
	Served []string // what it serves
}

func (e *ModelError) Error() string {
	if len(e.Served) == 0 {
		return fmt.Sprintf("%s lists no model", e.URL)
	}
	return fmt.Sprintf("endpoint.model: %q is not served at %s (it serves %s)", e.Want, e.URL, strings.Join(e.Served, ", "))
}

// ServerError is a server that could not be asked for its models: not
// reachable, refusing the key, or still loading after the wait.
type ServerError struct {
	URL    string // the /models URL asked, password masked
	Status int    // HTTP status, 0 when it never answered
	Err    error
}

func (e *ServerError) Error() string { return fmt.Sprintf("list models at %s: %v", e.URL, e.Err) }
func (e *ServerError) Unwrap() error { return e.Err }

// NeedsKey reports whether the server refused for want of an API key.
func (e *ServerError) NeedsKey() bool {
	return e.Status == http.StatusUnauthorized || e.Status == http.StatusForbidden
}

// modelWait is how long resolveModel waits for a server that is loading.
const modelWait = 10 * time.Minute

// resolveModel asks the server which models it serves before anything is
// sent: the first one when want is empty, else a check that want is among
// them (a wrong name would otherwise turn every prompt into a 404 in
// DIR/errors). A server that is still loading (vLLM takes minutes for a
// large model) is waited for, with a line every 30 s, for up to 10 minutes.
// A server without GET /models (a gateway routing only chat) is taken at
// its word when want is set. The model's context comes along when the
// server lists it (vLLM's and SGLang's max_model_len, llama.cpp's
// meta.n_ctx), else 0, and so does the entry's owned_by, which names the
// server.
func resolveModel(ctx context.Context, client *Client, baseURL, want string, log io.Writer) (Model, error) {
	return resolveModelClock(ctx, client, baseURL, want, log, realClock{})
}

// waitClock is the time resolveModel waits by; tests give a fake one.
type waitClock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) bool // false: ctx ended
}

type realClock struct{}

func (realClock) Now() time.Time                                  { return time.Now() }
func (realClock) Sleep(ctx context.Context, d time.Duration) bool { return backoff.Sleep(ctx, d) }

// waitingLine is the line said while the server does not answer: how long
// it has been, and how long until the run gives up, so that a person
// watching knows whether to wait or to go and look at the server.
func waitingLine(where string, waited, limit time.Duration, cause error) string {
	waited = waited.Truncate(time.Second)
	return fmt.Sprintf("waiting for the server at %s: %s so far, giving up in %s (%v)",
		where, waited, max(limit-waited, 0), cause)
}

func resolveModelClock(ctx context.Context, client *Client, baseURL, want string, log io.Writer, clock waitClock) (Model, error) {
	return resolveModelUntil(ctx, client, baseURL, want, log, clock, nil)
}

// ResolveModels is resolveModel on every endpoint, all at once. One endpoint
// is resolveModel. With several, each must serve the model (the same one:
// with endpoint.model empty, each one's first), else the error names the
// endpoint. An endpoint that does not answer while another has (refusing
// connections, 5xx) is no reason to wait: it is said on log, and the run
// starts with the others; the first request sent to it finds it down and
// its gate probes it back in, the probe checking the model (generator/pool/router.go).
// When none answers, each is waited for as resolveModel waits, and the
// first to answer ends the others' wait.
func ResolveModels(ctx context.Context, clients []*Client, urls []string, want string, log io.Writer) (Model, error) {
	if len(clients) == 1 {
		return resolveModel(ctx, clients[0], urls[0], want, log)
	}
	type result struct {
		model Model
		err   error
	}
	var answered atomic.Bool
	giveUp := func() bool { return answered.Load() }
	results := make([]result, len(clients))
	var wg sync.WaitGroup
	for i := range clients {
		wg.Go(func() {
			m, err := resolveModelUntil(ctx, clients[i], urls[i], want, log, realClock{}, giveUp)
			if err == nil {
				answered.Store(true)
			}
			results[i] = result{m, err}
		})
	}
	wg.Wait()
	var first *Model
	var firstURL string
	var down []int
	for i, res := range results {
		var se *ServerError
		switch {
		case res.err == nil:
			if first == nil {
				first, firstURL = &results[i].model, redact.URL(urls[i])
			} else if res.model.ID != first.ID {
				return Model{}, fmt.Errorf("endpoint.base_url: the endpoints serve different models: %s serves %q, %s serves %q; every endpoint must serve the same model (set endpoint.model to pick one they all serve)",
					firstURL, first.ID, redact.URL(urls[i]), res.model.ID)
			}
		case errors.As(res.err, &se) && (se.Status == 0 || se.Status >= 500) && !IsCertificateError(res.err):
			// Away (refusing, 5xx), not refusing us (a key, a
			// certificate): the others start without it.
			down = append(down, i)
		default:
			return Model{}, res.err
		}
	}
	if first == nil {
		return Model{}, results[0].err
	}
	for _, i := range down {
		fmt.Fprintf(log, "warning: endpoint %s does not answer (%v); starting with the other %d, it joins when it answers with %q\n",
			redact.URL(urls[i]), results[i].err, len(urls)-len(down), first.ID)
	}
	return *first, nil
}

// resolveModelUntil is resolveModelClock that, when giveUp is not nil and
// says so after a failed attempt, stops waiting for this server and returns
// the attempt's error as a *ServerError (another endpoint answered).
func resolveModelUntil(ctx context.Context, client *Client, baseURL, want string, log io.Writer, clock waitClock, giveUp func() bool) (Model, error) {
	start := clock.Now()
	deadline := start.Add(modelWait)
	// Quiet for the first seconds: a server started a moment ago (make run)
	// is not worth a line.
	lastSaid := start.Add(-25 * time.Second)
	// A loading server is polled, quickly at first: make run starts its
	// mock a moment before.
	poll := backoff.Policy{Initial: 500 * time.Millisecond, Max: 2 * time.Second}
	safe := redact.URL(baseURL)
	where := strings.TrimRight(safe, "/") + "/models"
	for attempt := 1; ; attempt++ {
		reqCtx, cancel := context.WithTimeout(ctx, 10*time.Second)
		models, err := client.ModelList(reqCtx)
		cancel()
		if err == nil {
			if want == "" && len(models) > 0 {
				return models[0], nil
			}
			served := make([]string, len(models))
			for i, m := range models {
				served[i] = m.ID
			}
			if i := slices.Index(served, want); want != "" && i >= 0 {
				return models[i], nil
			}
			return Model{}, &ModelError{URL: where, Want: want, Served: served}
		}
		if ctx.Err() != nil {
			return Model{}, ctx.Err()
		}
		ce := Classify(err)
		if want != "" && (ce.Status == http.StatusNotFound || ce.Status == http.StatusMethodNotAllowed) {
			fmt.Fprintf(log, "note: %s answers %d; going on with endpoint.model %q\n", where, ce.Status, want)
			return Model{ID: want}, nil
		}
		shown := redact.URLIn(err, baseURL)
		now := clock.Now()
		if !ce.Retryable || now.After(deadline) || giveUp != nil && giveUp() {
			return Model{}, &ServerError{URL: where, Status: ce.Status, Err: shown}
		}
		if now.Sub(lastSaid) > 30*time.Second {
			fmt.Fprintln(log, waitingLine(safe, now.Sub(start), modelWait, shown))
			lastSaid = now
		}
		if !clock.Sleep(ctx, poll.Ceiling(attempt)) {
			return Model{}, ctx.Err()
		}
	}
}
