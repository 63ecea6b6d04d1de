// Package wire is synthgen's client of OpenAI-compatible chat completion
// servers (vLLM, SGLang, llama.cpp, hosted APIs): one request, plain or
// streamed, read into a Response or an *Error that says whether to retry.
// Its jobs, by file: the request body and the answer made a Response
// (request.go, decode.go, tokens.go, toolcalls.go: encoding, a decoded
// answer or chunk folded into a Response or an *Error, tool-call delta
// assembly; the bytes are decoded by package codec); the HTTP client over them (client.go, send.go, transport.go,
// tls.go, redact.go, ratelimit.go; what cuts a request short, cut.go); stranded streams, the requests a
// server holds without a byte while later ones are answered (stranded.go);
// several answers to one request carrying n (choices.go); and model
// discovery from /v1/models (model.go). It speaks package chat's
// messages, the record's own, so nothing is copied on the way in or out.
package wire

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/generator/wire/codec"
	"github.com/synthgen/synthgen/job"
)

// This file is the client's face: one chat completion, plain or streamed,
// and the model list. The request body is ours (request.go) and so is the
// reading of the answer (decode.go, package codec): go-openai's request type
// drops temperature 0 (omitempty) and has no room for extra_body or a row's
// own fields, its response types drop vLLM's `reasoning`, and its stream
// reader costs 1.43x our CPU per chunk (docs/decisions/, "wire client").
// go-openai's own types still say what an error status was (openai.go,
// the one file that imports it): Classify reads *openai.APIError and
// *openai.RequestError, as go-openai reports them.

// Logprobs are an answer's per-token logprobs: the record's fields
// (sink.Logprobs) in their order, so that the record takes them by a
// conversion, with no copy. TopIDs or TopTokens: the alternatives by id,
// or by text when the server named them so.
type Logprobs struct {
	TokenLogprobs []float32
	TopIDs        [][]int32
	TopTokens     [][]string
	TopLogprobs   [][]float32
}

// Options configure a Client.
type Options struct {
	BaseURL string // e.g. http://localhost:8000/v1
	// APIKey is sent as "Authorization: Bearer KEY". Empty sends no
	// Authorization header at all, which is what vLLM without --api-key
	// expects (it ignores the header then; a server that requires a key
	// rejects "Bearer EMPTY" just the same).
	APIKey string
	// Timeout bounds one request, whole, through its context (0 = none).
	// There is no response-header timeout: a queued request's first byte
	// may take minutes under load.
	Timeout time.Duration
	// StallTimeout bounds the silence of a streamed answer once its
	// headers came: no byte (a keep-alive comment counts) for this long
	// ends the attempt with Cause "stall" (0 = off). Before its headers it
	// bounds a stream that a later one to the same server overtook
	// (stranded.go). A plain answer sends nothing until it is whole, so it
	// has only Timeout.
	StallTimeout time.Duration
	// OnAwait, when set, is told of the streams that have waited a second
	// or more for their headers (+n) and of those that stopped waiting
	// (-n): the requests a server holds in its queue without a byte, for
	// the progress line.
	OnAwait func(delta int)
	// MaxConns is the pool size: the transport keeps this many idle
	// connections per host, so N requests in flight never wait for a
	// connection nor open and close one per request. 0 = defaultMaxConns (256).
	MaxConns int
	// TLS configures https connections (ClientTLS); nil: Go's defaults.
	TLS *tls.Config
	// HTTPClient, when set, is used as is (its transport included); nil
	// builds one from the options.
	HTTPClient *http.Client
	// Replicas, when set, is the group of the clients of the other
	// replicas of one model (NewReplicas): with StallTimeout, a stream to
	// a server silent StallTimeout while another replica answered is cut
	// (stranded.go).
	Replicas *Replicas
}

// defaultMaxConns is the pool size when ClientOptions.MaxConns is 0.
const defaultMaxConns = 256

// Request is one chat completion to send: the job's Sampling (model,
// max_tokens, temperature, top_p, extra_body; Sampling's n is not sent:
// N is), the messages and how to read the answer.
// EncodeRequest writes each field:
//   - MaxTokens 0 is not sent (the server's default);
//   - Temperature is always sent: 0 reaches the server as 0;
//   - TopP is sent when > 0 (0 is not a valid top_p for OpenAI or vLLM, so
//     it means "not set" rather than a 400 per prompt);
//   - Extra (extra_body) is merged into the top level (top_k, min_p,
//     chat_template_kwargs, ...); a key there replaces the field of the
//     same name, except "stream", which decides how the answer is read;
//   - Params (a request row's own fields, dataset.Prompt.Params) come
//     last and replace the field of the same name, the job's or
//     extra_body's, for that row: a row's temperature 0 is sent as 0.
type Request struct {
	job.Sampling
	// Messages are encoded as they are, not copied: the caller's turns
	// (the record's) must not change while the request is in flight.
	Messages []chat.Message
	// Params are the row's own request fields, values as the dataset
	// decoded them (json.Number keeps a number as written).
	Params map[string]any
	// Tools is the row's tools list, JSON text as sent ("" none); with it
	// go Sampling.ToolChoice (auto when empty) unless the row names its own.
	Tools string
	// Stream asks for SSE, with stream_options.include_usage=true so the last
	// chunk carries the token counts.
	Stream bool
	// N is how many answers this one request asks for (OpenAI's n, sent
	// when > 1): the answer's choices are Response.Choices (choices.go).
	// 0 or 1: one answer, n not sent.
	N int
}

// Response is one complete answer.
type Response struct {
	Model            string
	Reasoning        string // `reasoning` (vLLM >= 0.11) else `reasoning_content`
	Content          string // null -> ""
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	// CachedTokens are the prompt tokens the server served from its cache
	// (usage.prompt_tokens_details.cached_tokens; 0 when it says nothing).
	CachedTokens int
	UsageKnown   bool          // the server reported usage
	Chunks       int           // streamed chunks that carried reasoning/content text
	TTFT         time.Duration // streaming: time to the first reasoning/content delta
	// ToolCalls are the answer's calls as the server sent them (a stream's
	// assembled by index: toolcalls.go); nil for none.
	ToolCalls []chat.ToolCall
	// The tokens (tokens.go), when the server sent them: the prompt's and
	// the answer's ids, the answer's logprobs (nil: none), and what of
	// them disagrees with usage ("" when nothing, or nothing to check).
	PromptTokenIDs   []int32
	TokenIDs         []int32
	Logprobs         *Logprobs
	TokenIDsMismatch string
	// Limits are the rate limits the server stated in the answer's
	// headers (ratelimit.go); zero when it stated none.
	Limits Limits
	// Choices, for a request with N > 1, are the choices the server
	// answered in index order (fewer than N from a server that ignores
	// n), each a Response with its own text and its share of the usage
	// (choices.go); the Response itself is its first choice with the
	// request's whole usage. Index is a choice's index. nil for N <= 1.
	Choices []Response
	Index   int
}

// Client sends chat completions to one OpenAI-compatible server over
// net/http. It is safe for concurrent use.
type Client struct {
	hc      *http.Client
	base    string // BaseURL without its trailing slash
	timeout time.Duration
	stall   time.Duration // see Options.StallTimeout
	key     apiKey        // sent as a bearer token; redacted from everything the server says
	auth    []string      // the Authorization header of every request (nil: no key, none sent)
	replay  replayKeys    // marks each POST replayable on a dropped keep-alive connection (send.go)
	await   *awaiting     // streams without headers yet (stranded.go); nil without StallTimeout
	// chunkDecoder, when set, replaces decodeChunk: the stream benchmark
	// runs each decoder inside the whole client.
	chunkDecoder func([]byte) (codec.Delta, error)
}

// New builds a Client.
func New(opts Options) *Client {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: NewTransport(opts.MaxConns, opts.TLS)}
	}
	c := &Client{hc: hc, base: strings.TrimRight(opts.BaseURL, "/"), timeout: opts.Timeout, stall: opts.StallTimeout, key: apiKey(opts.APIKey), replay: newReplayKeys()}
	if opts.APIKey != "" {
		c.auth = []string{"Bearer " + opts.APIKey}
	}
	if opts.StallTimeout > 0 {
		c.await = newAwaiting(opts.StallTimeout, opts.OnAwait, opts.Replicas)
	}
	return c
}

// NewTransport is the transport for maxConns requests in flight to one
// server: that many idle keep-alive connections per host (the default of 2
// would close and reopen connections all the time at 200 in flight), no cap
// on open connections, HTTP/1.1 (vLLM serves HTTP/1.1, and HTTP/2 would put
// every stream on one connection's flow-control window), no
// ResponseHeaderTimeout, and no "Accept-Encoding: gzip": an answer is a few
// KB beside seconds of generation, so compressing it buys nothing, and
// asking cost every request a header map and two lookups (3.3-3.9% of a
// plain request's instructions, docs/decisions/2026-11-plain-request-cpu.md).
//
// TCP keepalive probes a connection after 30 s without traffic, every 15 s,
// and gives up after 4 unanswered probes: a peer that vanished (a machine
// powered off, a NAT that forgot the flow) fails the request as a timeout
// within about 90 s, instead of endpoint.timeout. The probes are answered
// by the peer's kernel, so a server busy with a long plain answer passes.
func NewTransport(maxConns int, tlsConfig *tls.Config) *http.Transport {
	if maxConns <= 0 {
		maxConns = defaultMaxConns
	}
	return &http.Transport{
		Proxy: http.ProxyFromEnvironment,
		DialContext: (&net.Dialer{
			Timeout:         30 * time.Second,
			KeepAliveConfig: tcpKeepAlive,
		}).DialContext,
		MaxIdleConns:          0, // no global cap: MaxIdleConnsPerHost governs
		MaxIdleConnsPerHost:   maxConns,
		MaxConnsPerHost:       0,
		IdleConnTimeout:       90 * time.Second,
		TLSClientConfig:       tlsConfig,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
		ForceAttemptHTTP2:     false,
		DisableCompression:    true,
	}
}

// tcpKeepAlive is the transport's TCP keepalive (see newTransport).
var tcpKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 15 * time.Second, Count: 4}

// Models lists the ids the server serves (GET /models).
func (c *Client) Models(ctx context.Context) ([]string, error) {
	list, err := c.ModelList(ctx)
	if err != nil {
		return nil, err
	}
	ids := make([]string, 0, len(list))
	for _, m := range list {
		ids = append(ids, m.ID)
	}
	return ids, nil
}

// Model is one model of GET /models: its id, its context and the server
// that lists it.
type Model struct {
	ID string `json:"id"`
	// MaxModelLen is the model's context in tokens, 0 when the server does
	// not say: vLLM's and SGLang's max_model_len, else llama.cpp's
	// meta.n_ctx (the context of one of its slots, what one request gets;
	// not meta.n_ctx_train, the context the model was trained for, which
	// the server's -c may cut).
	MaxModelLen int `json:"max_model_len"`
	// OwnedBy is the entry's owned_by: vLLM, SGLang and llama.cpp each
	// write their own name there ("vllm", "sglang", "llamacpp").
	OwnedBy string `json:"owned_by,omitempty"`
}

// modelsJSON is a models list as servers send it: OpenAI's model entry
// (its id and owned_by) with what vLLM and SGLang (max_model_len) and
// llama.cpp (meta) add to it.
type modelsJSON struct {
	Data []struct {
		ID          string          `json:"id"`
		OwnedBy     string          `json:"owned_by"`
		MaxModelLen json.RawMessage `json:"max_model_len"`
		Meta        json.RawMessage `json:"meta"`
	} `json:"data"`
}

// contextOf is a count from a models entry ("40960", or null for a LoRA
// without its own), 0 when it is not a positive integer.
func contextOf(raw json.RawMessage) int {
	if n, ok := intField(json.Number(strings.TrimSpace(string(raw)))); ok && n > 0 {
		return n
	}
	return 0
}

// ModelList lists the models the server serves (GET /models).
func (c *Client) ModelList(ctx context.Context) ([]Model, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	resp, err := c.send(ctx, http.MethodGet, "/models", nil, false)
	if err != nil {
		return nil, c.key.redact(c.fail(ctx, fmt.Errorf("list models: %w", err)))
	}
	raw, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody))
	resp.Body.Close()
	if err != nil {
		return nil, c.key.redact(c.fail(ctx, fmt.Errorf("list models: read the body: %w", err)))
	}
	var body modelsJSON
	if err := json.Unmarshal(raw, &body); err != nil {
		return nil, c.key.redact(decodeError("list models", err, raw))
	}
	out := make([]Model, 0, len(body.Data))
	for _, m := range body.Data {
		sm := Model{ID: m.ID, OwnedBy: m.OwnedBy, MaxModelLen: contextOf(m.MaxModelLen)}
		if sm.MaxModelLen == 0 && len(m.Meta) > 0 {
			// A meta that is not an object says no context, and
			// fails nothing.
			var meta struct {
				NCtx json.RawMessage `json:"n_ctx"`
			}
			if json.Unmarshal(m.Meta, &meta) == nil {
				sm.MaxModelLen = contextOf(meta.NCtx)
			}
		}
		out = append(out, sm)
	}
	return out, nil
}

// Complete sends one chat completion and returns the complete answer, or an
// *Error (see Classify). onDelta (may be nil) is told of the streamed
// chunks that carry reasoning or content text, so the caller can count
// tokens as they arrive: with n such chunks at a time, once the chunks
// one read brought are decoded (before the stream waits for the server),
// not once a chunk.
//
// An answer is complete only when a finish_reason arrived: a stream that ends
// before one (with or without [DONE]) is an
// *Error with Cause "stream_cut". A stream that sent its finish_reason and
// then ended without usage or [DONE] is complete; UsageKnown tells whether
// the counts came.
func (c *Client) Complete(ctx context.Context, req Request, onDelta func(n int)) (Response, error) {
	resp, err := c.complete(ctx, req, onDelta)
	if err != nil {
		// A server or proxy may echo the Authorization header in its
		// message: nothing it says reaches a record or a terminal unredacted.
		return resp, c.key.redact(err)
	}
	if resp.Choices == nil { // several choices' are each checked (choices.go)
		resp.TokenIDsMismatch = tokenMismatch(req.ReturnTokenIDs, &resp)
	}
	return resp, nil
}

func (c *Client) complete(ctx context.Context, req Request, onDelta func(n int)) (Response, error) {
	start := time.Now()
	body, err := EncodeRequest(req)
	if err != nil {
		return Response{}, &Error{Cause: CauseRequest, Message: err.Error(), Err: err}
	}
	var stall time.Duration
	if req.Stream && c.stall > 0 {
		stall = c.stall // the watch starts once the headers came
	}
	// One context a request, whatever may cut it: endpoint.timeout, a
	// stall (errStalled), the stranded-stream rules (stranded.go). Each
	// layer of contexts cost a plain request an allocation, a registration
	// with its parent, and a step in every lookup net/http makes through
	// the chain (docs/decisions/2026-11-plain-request-cpu.md, 2026-12-06).
	ctx, abort, timer := c.requestContext(ctx, stall > 0 || c.await != nil)
	if timer != nil {
		defer timer.Stop()
	}
	if abort != nil {
		defer abort(nil)
	}
	var waited *awaiter
	if c.await != nil {
		waited = c.await.sent(abort, !req.Stream)
	}
	resp, err := c.send(ctx, http.MethodPost, "/chat/completions", body, req.Stream)
	if waited != nil {
		// An error status came with headers (send returns it unwrapped;
		// errors.As here moved a variable to the heap on every request).
		_, status := err.(*statusError)
		waited.done(err == nil || status)
	}
	if err != nil {
		return Response{}, c.failStall(ctx, stall, err)
	}
	defer resp.Body.Close()
	limits := parseLimits(resp.Header)
	if !req.Stream {
		r, err := c.completePlain(ctx, resp, req.N)
		r.Limits = limits
		return r, err
	}
	if ct := resp.Header.Get("Content-Type"); strings.HasPrefix(ct, "text/html") {
		// A proxy's or a login page where the stream should be: said as
		// what it is, not as a stream that ended before its first event.
		return Response{}, &Error{Cause: CauseDecode, Status: resp.StatusCode, Retryable: true,
			Message: fmt.Sprintf("answered %d with an HTML page (%s), not an event stream: is endpoint.base_url a proxy's or a login page?", resp.StatusCode, ct),
			Err:     errors.New("stream: an HTML page, not an event stream")}
	}
	var events io.Reader = resp.Body
	if stall > 0 {
		watched := watchIdle(resp.Body, stall, func() { abort(errStalled) })
		defer watched.Close()
		if c.await != nil {
			defer c.await.reads(watched)()
		}
		events = watched
	}
	var r Response
	if req.N > 1 {
		r, err = c.completeStreamN(ctx, events, stall, start, newAnswerBound(req), req.N, onDelta)
	} else {
		r, err = c.completeStream(ctx, events, stall, start, newAnswerBound(req), onDelta)
	}
	r.Limits = limits
	return r, err
}

// ObserveLoad tells the client what a scrape of its server's /metrics,
// begun at at, counted running and waiting: a scrape that shows neither,
// after a request sent later than one still waiting was answered, cuts
// that one (cause stall), plain or streamed (stranded.go). Without
// StallTimeout it does nothing.
func (c *Client) ObserveLoad(at time.Time, running, waiting float64) {
	if c.await != nil {
		c.await.load(at, running, waiting)
	}
}

// answerBound is how much text a streamed answer may bring while no
// finish_reason comes: more text chunks, or more bytes of reasoning and
// content, than max_tokens allows is a server that does not stop (cause
// "overlong"), and memory must not grow with it. A chunk carries at least
// one token and a token rarely 64 bytes; the slack covers servers that
// count otherwise.
type answerBound struct {
	maxTokens int
	chunks    int
	bytes     int
}

// unboundedTokens stands for max_tokens when the request sets none: the
// server's own limit, which no model's context exceeds.
const unboundedTokens = 1 << 20

func newAnswerBound(req Request) answerBound {
	n := req.MaxTokens
	for _, fields := range []map[string]any{req.Extra, req.Params} {
		for _, k := range []string{"max_tokens", "max_completion_tokens"} {
			if v, ok := intField(fields[k]); ok {
				n = v
			}
		}
	}
	if n <= 0 || n > unboundedTokens {
		n = unboundedTokens
	}
	return answerBound{maxTokens: n, chunks: n + 64, bytes: n*64 + 64<<10}
}

// intField reads a request field's number as the dataset or the config
// decoded it.
func intField(v any) (int, bool) {
	switch x := v.(type) {
	case int:
		return x, true
	case int64:
		return int(x), true
	case float64:
		return int(x), true
	case json.Number:
		f, err := x.Float64()
		return int(f), err == nil
	}
	return 0, false
}

// check fails an answer that went past the bound. Its tokens are bound
// too: more ids or logprobs than max_tokens allows, or more alternatives
// than maxAlternatives a token.
func (b answerBound) check(a *answer) error {
	size := a.reasoning.Len() + a.content.Len() + a.tools.size
	ids, lps, alts := a.toks.tokens()
	if a.resp.Chunks <= b.chunks && size <= b.bytes && ids <= b.chunks && lps <= b.chunks && alts <= b.chunks*maxAlternatives {
		return nil
	}
	return &Error{Cause: CauseOverlong, Retryable: true,
		Message: fmt.Sprintf("the answer went past what max_tokens %d allows (%d text chunks, %d bytes, %d token ids, %d logprobs) without a finish_reason", b.maxTokens, a.resp.Chunks, size, ids, lps),
		Err:     errors.New("stream: answer longer than max_tokens allows")}
}

// maxAlternatives bounds the alternatives a streamed token may bring
// (logprobs' top_logprobs): well past any server's limit (vLLM's
// --max-logprobs defaults to 20).
const maxAlternatives = 64

// completePlain reads and decodes a plain answer's body.
func (c *Client) completePlain(ctx context.Context, resp *http.Response, n int) (Response, error) {
	buf := answerBufs.Get().(*answerBuf)
	raw, err := readAllInto(buf.b, resp.Body, resp.ContentLength)
	buf.b = raw
	if err != nil {
		return Response{}, c.fail(ctx, fmt.Errorf("read the answer (status %d): %w", resp.StatusCode, err))
	}
	var answer Response
	if n > 1 {
		answer, err = decodeResponseN(raw, n)
	} else {
		answer, err = decodeResponse(raw)
	}
	if err == nil {
		// The answer's strings are copies: the buffer is free. An error
		// may quote the body, so its buffer is left to the collector.
		buf.release()
	}
	return answer, err
}

// completeStream reads a streamed answer's events to its end.
func (c *Client) completeStream(ctx context.Context, body io.Reader, stall time.Duration, start time.Time, bound answerBound, onDelta func(int)) (Response, error) {
	events := newSSEReader(body)
	defer events.release()
	decode := decodeChunkInto
	if c.chunkDecoder != nil {
		decode = func(b []byte, _ *codec.TokenBuf) (codec.Delta, error) { return c.chunkDecoder(b) }
	}
	var a answer
	tb := codec.TokenBuf{Stream: true} // the chunks' scratch, one chunk's at a time
	deltas := deltaBatch{report: onDelta, events: events}
	defer deltas.flush()
	for {
		raw, err := events.next()
		if err != nil {
			if a.resp.FinishReason != "" {
				// The answer is whole; only what follows it (the usage
				// chunk, [DONE]) may be missing.
				break
			}
			if errors.Is(err, io.EOF) {
				err = errStreamCut
			}
			return Response{}, c.failStream(ctx, stall, &a, err)
		}
		d, err := decode(raw, &tb)
		if err != nil {
			return Response{}, err
		}
		text := a.add(&d)
		if text || d.TokenIDs != nil || d.Logprobs.Logprob != nil {
			if err := bound.check(&a); err != nil {
				return Response{}, err
			}
		}
		if text {
			if a.resp.Chunks == 1 {
				a.resp.TTFT = time.Since(start)
			}
			deltas.add()
		}
	}
	if err := checkFinish(a.resp.FinishReason); err != nil {
		return Response{}, err
	}
	return a.result(), nil
}

// failStream classifies an error that ended a stream after its 200: any
// read failure there (reset, unexpected EOF, a plain EOF) cut an answer that
// had started, which is what "stream_cut" means to a person reading
// DIR/errors/.
func (c *Client) failStream(ctx context.Context, stall time.Duration, a *answer, err error) *Error {
	e := c.failStall(ctx, stall, err)
	if e.Cause == CauseStall {
		e.Message = fmt.Sprintf("no byte for %s (endpoint.stall_timeout) after %d text chunks", stall, a.resp.Chunks)
		return e
	}
	if e.Cause == CauseConnection {
		e.Cause = CauseStreamCut
	}
	if e.Cause == CauseStreamCut {
		e.Message = fmt.Sprintf("stream ended after %d text chunks without a finish_reason: %v", a.resp.Chunks, err)
	}
	return e
}

// fail classifies err: the context's own state first (a canceled request
// fails with whatever the transport made of it), then what an error status
// said (its message, whether the prompt is too long, Retry-After).
func (c *Client) fail(ctx context.Context, err error) *Error {
	ce := ctx.Err()
	if cause := context.Cause(ctx); errors.Is(cause, errTimedOut) {
		ce = cause // the request's own timeout (requestContext): a deadline
	}
	if ce != nil && !errors.Is(err, ce) {
		err = fmt.Errorf("%w (%v)", ce, err)
	}
	e := Classify(err)
	var se *statusError
	if !errors.As(err, &se) {
		return e
	}
	if e.Status == 0 {
		e.Status = se.status
	}
	if len(se.body) > 0 {
		if m := errorMessageCut(se.body, se.cut); m != "" {
			e.Message = m
		}
		markTooLong(e, se.body)
	}
	if e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable {
		e.RetryAfter = retryAfter(se.header, time.Now())
	}
	e.Limits = parseLimits(se.header)
	return e
}
