package generator

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"time"
	"unicode/utf8"

	openai "github.com/sashabaranov/go-openai"

	"github.com/synthgen/synthgen/sink"
)

// This file is the bridge between the engine and go-openai (ARCHITECTURE.md,
// "The libraries' pitfalls"). go-openai sends and receives, but:
//   - its request type drops temperature 0 (omitempty) and has no top_k,
//     min_p or chat_template_kwargs, so we build the exact body ourselves and
//     swap it in through ClientConfig.HTTPClient (the HTTPDoer hook);
//   - its response types drop vLLM's `reasoning`, so the Doer keeps the raw
//     plain body and streams are read with RecvRaw, and decode.go decodes;
//   - its errors carry no headers, so the Doer keeps them for Retry-After.
// Everything about one request travels in an *exchange in the context.

// Message is one chat turn as sent: the record's type, so that what was
// sent is what the record holds, with no copy on the way to disk.
type Message = sink.Message

// wireOptions configure a Client.
type wireOptions struct {
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
	// ends the attempt with Cause "stall" (0 = off). A plain answer sends
	// nothing until it is whole, so it has only Timeout.
	StallTimeout time.Duration
	// MaxConns is the pool size: the transport keeps this many idle
	// connections per host, so N requests in flight never wait for a
	// connection nor open and close one per request. 0 = defaultMaxConns (256).
	MaxConns int
	// TLS configures https connections (ClientTLS); nil: Go's defaults.
	TLS *tls.Config
	// HTTPClient, when set, is used as is (its transport included); nil
	// builds one from the options.
	HTTPClient *http.Client
}

// defaultMaxConns is the pool size when ClientOptions.MaxConns is 0.
const defaultMaxConns = 256

// wireRequest is one chat completion to send: the job's Sampling (model,
// max_tokens, temperature, top_p, extra_body; n is not sent, each sample
// is its own request), the messages and how to read the answer.
// encodeRequest writes each field:
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
type wireRequest struct {
	Sampling
	Messages []Message
	// Params are the row's own request fields, values as the dataset
	// decoded them (json.Number keeps a number as written).
	Params map[string]any
	// Stream asks for SSE, with stream_options.include_usage=true so the last
	// chunk carries the token counts.
	Stream bool
}

// wireResponse is one complete answer.
type wireResponse struct {
	Model            string
	Reasoning        string // `reasoning` (vLLM >= 0.11) else `reasoning_content`
	Content          string // null -> ""
	FinishReason     string
	PromptTokens     int
	CompletionTokens int
	UsageKnown       bool          // the server reported usage
	Chunks           int           // streamed chunks that carried reasoning/content text
	TTFT             time.Duration // streaming: time to the first reasoning/content delta
}

// wireClient sends chat completions through go-openai. It is safe for
// concurrent use.
type wireClient struct {
	oa      *openai.Client
	timeout time.Duration
	stall   time.Duration // see wireOptions.StallTimeout
	key     apiKey        // redacted from everything the server says
	// chunkDecoder, when set, replaces decodeChunk: the stream benchmark
	// runs each decoder inside the whole client.
	chunkDecoder func([]byte) (chunkDelta, error)
}

// bridgeModel is the model name in the request go-openai builds and
// validates. The body that reaches the server is ours (see doer), so the
// name only has to pass go-openai's model checks, which reject some real
// OpenAI names with parameters that vLLM serves fine.
const bridgeModel = "synthgen-bridge"

// newWireClient builds a Client.
func newWireClient(opts wireOptions) *wireClient {
	hc := opts.HTTPClient
	if hc == nil {
		hc = &http.Client{Transport: newTransport(opts.MaxConns, opts.TLS)}
	}
	cfg := openai.DefaultConfig(opts.APIKey)
	cfg.BaseURL = strings.TrimRight(opts.BaseURL, "/")
	key := apiKey(opts.APIKey)
	cfg.HTTPClient = &doer{next: hc, key: key}
	// go-openai counts consecutive non-data lines (keep-alive comments,
	// blank separators) and gives up past this limit; a server that pings
	// while a request waits in its queue must not kill the stream. The
	// request's Timeout is what bounds a silent stream.
	cfg.EmptyMessagesLimit = math.MaxUint32
	return &wireClient{oa: openai.NewClientWithConfig(cfg), timeout: opts.Timeout, stall: opts.StallTimeout, key: key}
}

// newTransport is the transport for maxConns requests in flight to one
// server: that many idle keep-alive connections per host (the default of 2
// would close and reopen connections all the time at 200 in flight), no cap
// on open connections, HTTP/1.1 (vLLM serves HTTP/1.1, and HTTP/2 would put
// every stream on one connection's flow-control window), and no
// ResponseHeaderTimeout.
//
// TCP keepalive probes a connection after 30 s without traffic, every 15 s,
// and gives up after 4 unanswered probes: a peer that vanished (a machine
// powered off, a NAT that forgot the flow) fails the request as a timeout
// within about 90 s, instead of endpoint.timeout. The probes are answered
// by the peer's kernel, so a server busy with a long plain answer passes.
func newTransport(maxConns int, tlsConfig *tls.Config) *http.Transport {
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
	}
}

// tcpKeepAlive is the transport's TCP keepalive (see newTransport).
var tcpKeepAlive = net.KeepAliveConfig{Enable: true, Idle: 30 * time.Second, Interval: 15 * time.Second, Count: 4}

// Models lists the ids the server serves (GET /models).
func (c *wireClient) Models(ctx context.Context) ([]string, error) {
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

// servedModel is one model of GET /models: its id and, from vLLM, its
// max_model_len (0 when the server does not say; go-openai's type drops it,
// so the doer keeps the body and it is decoded here).
type servedModel struct {
	ID          string `json:"id"`
	MaxModelLen int    `json:"max_model_len"`
}

// ModelList lists the models the server serves (GET /models).
func (c *wireClient) ModelList(ctx context.Context) ([]servedModel, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ex := &exchange{keep: true}
	list, err := c.oa.ListModels(withExchange(ctx, ex))
	if err != nil {
		return nil, c.key.redact(c.fail(ctx, ex, fmt.Errorf("list models: %w", err)))
	}
	var body struct {
		Data []struct {
			ID          string          `json:"id"`
			MaxModelLen json.RawMessage `json:"max_model_len"`
		} `json:"data"`
	}
	if json.Unmarshal(ex.raw, &body) != nil {
		// Not the shape we know: go-openai's ids, sizes unknown.
		out := make([]servedModel, 0, len(list.Models))
		for _, m := range list.Models {
			out = append(out, servedModel{ID: m.ID})
		}
		return out, nil
	}
	out := make([]servedModel, 0, len(body.Data))
	for _, m := range body.Data {
		sm := servedModel{ID: m.ID}
		if n, ok := intField(json.Number(strings.TrimSpace(string(m.MaxModelLen)))); ok && n > 0 {
			sm.MaxModelLen = n
		}
		out = append(out, sm)
	}
	return out, nil
}

// Complete sends one chat completion and returns the complete answer, or an
// *Error (see classify). onDelta (may be nil) is called on every streamed
// chunk that carries reasoning or content text, with the number of such
// deltas in that chunk (1), so the caller can count tokens as they arrive.
//
// An answer is complete only when a finish_reason arrived: a stream that ends
// before one (with or without [DONE]: go-openai reports both as io.EOF) is an
// *Error with Cause "stream_cut". A stream that sent its finish_reason and
// then ended without usage or [DONE] is complete; UsageKnown tells whether
// the counts came.
func (c *wireClient) Complete(ctx context.Context, req wireRequest, onDelta func(n int)) (wireResponse, error) {
	resp, err := c.complete(ctx, req, onDelta)
	if err != nil {
		// A server or proxy may echo the Authorization header in its
		// message: nothing it says reaches a record or a terminal unredacted.
		return resp, c.key.redact(err)
	}
	return resp, nil
}

func (c *wireClient) complete(ctx context.Context, req wireRequest, onDelta func(n int)) (wireResponse, error) {
	start := time.Now()
	body, err := encodeRequest(req)
	if err != nil {
		return wireResponse{}, &Error{Cause: causeRequest, Message: err.Error(), Err: err}
	}
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	ex := &exchange{body: body, chat: true, stream: req.Stream}
	if req.Stream && c.stall > 0 {
		// The doer starts the watch once the headers came; a stall cancels
		// this attempt alone, with errStalled as the cause.
		var abort context.CancelCauseFunc
		ctx, abort = context.WithCancelCause(ctx)
		defer abort(nil)
		ex.stall, ex.abort = c.stall, abort
	}
	ctx = withExchange(ctx, ex)
	if !req.Stream {
		return c.completePlain(ctx, ex)
	}
	return c.completeStream(ctx, ex, start, newAnswerBound(req), onDelta)
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

func newAnswerBound(req wireRequest) answerBound {
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

// check fails an answer that went past the bound.
func (b answerBound) check(a *answer) error {
	size := a.reasoning.Len() + a.content.Len()
	if a.resp.Chunks <= b.chunks && size <= b.bytes {
		return nil
	}
	return &Error{Cause: causeOverlong, Retryable: true,
		Message: fmt.Sprintf("the answer went past what max_tokens %d allows (%d text chunks, %d bytes) without a finish_reason", b.maxTokens, a.resp.Chunks, size),
		Err:     errors.New("stream: answer longer than max_tokens allows")}
}

func (c *wireClient) completePlain(ctx context.Context, ex *exchange) (wireResponse, error) {
	if _, err := c.oa.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: bridgeModel}); err != nil {
		return wireResponse{}, c.fail(ctx, ex, err)
	}
	return decodeResponse(ex.raw)
}

func (c *wireClient) completeStream(ctx context.Context, ex *exchange, start time.Time, bound answerBound, onDelta func(int)) (wireResponse, error) {
	stream, err := c.oa.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: bridgeModel})
	if err != nil {
		return wireResponse{}, c.fail(ctx, ex, err)
	}
	defer stream.Close()
	var a answer
	for {
		raw, err := stream.RecvRaw()
		if err != nil {
			if a.resp.FinishReason != "" {
				// The answer is whole; only what follows it (the usage
				// chunk, [DONE]) may be missing.
				break
			}
			if errors.Is(err, io.EOF) {
				err = errStreamCut
			}
			return wireResponse{}, c.failStream(ctx, ex, &a, err)
		}
		decode := decodeChunk
		if c.chunkDecoder != nil {
			decode = c.chunkDecoder
		}
		d, err := decode(raw)
		if err != nil {
			return wireResponse{}, err
		}
		if a.add(&d) {
			if err := bound.check(&a); err != nil {
				return wireResponse{}, err
			}
			if a.resp.Chunks == 1 {
				a.resp.TTFT = time.Since(start)
			}
			if onDelta != nil {
				onDelta(1)
			}
		}
	}
	if err := checkFinish(a.resp.FinishReason); err != nil {
		return wireResponse{}, err
	}
	return a.result(), nil
}

// failStream classifies an error that ended a stream after its 200: any
// read failure there (reset, unexpected EOF, a plain EOF) cut an answer that
// had started, which is what "stream_cut" means to a person reading
// DIR/errors/.
func (c *wireClient) failStream(ctx context.Context, ex *exchange, a *answer, err error) *Error {
	e := c.fail(ctx, ex, err)
	if e.Cause == causeStall {
		e.Message = fmt.Sprintf("no byte for %s (endpoint.stall_timeout) after %d text chunks", ex.stall, a.resp.Chunks)
		return e
	}
	if e.Cause == causeConnection {
		e.Cause = causeStreamCut
	}
	if e.Cause == causeStreamCut {
		e.Message = fmt.Sprintf("stream ended after %d text chunks without a finish_reason: %v", a.resp.Chunks, err)
	}
	return e
}

// fail classifies err with what the exchange saw: the context's own state
// first (a canceled request fails with whatever the transport made of it),
// then the server's message and Retry-After.
func (c *wireClient) fail(ctx context.Context, ex *exchange, err error) *Error {
	if errors.Is(context.Cause(ctx), errStalled) {
		// Our own watch cut the stream, not the caller nor the deadline.
		return &Error{Cause: causeStall, Retryable: true,
			Message: fmt.Sprintf("no byte for %s (endpoint.stall_timeout)", ex.stall),
			Err:     fmt.Errorf("%w: %v", errStalled, err)}
	}
	if ce := ctx.Err(); ce != nil && !errors.Is(err, ce) {
		err = fmt.Errorf("%w (%v)", ce, err)
	}
	e := classify(err)
	if e.Status == 0 && ex.status >= 400 {
		e.Status = ex.status
	}
	if e.Status != 0 && len(ex.raw) > 0 {
		if m := errorMessageCut(ex.raw, ex.rawCut); m != "" {
			e.Message = m
		}
		markTooLong(e)
	}
	if (e.Status == http.StatusTooManyRequests || e.Status == http.StatusServiceUnavailable) && ex.header != nil {
		e.RetryAfter = parseRetryAfter(ex.header.Get("Retry-After"), time.Now())
	}
	return e
}

func (c *wireClient) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if c.timeout > 0 {
		return context.WithTimeout(ctx, c.timeout)
	}
	return context.WithCancel(ctx)
}

// exchange is one request's state shared between Complete and the doer.
// The doer writes it before go-openai returns, and Complete reads it after:
// no two goroutines touch it at once.
type exchange struct {
	body   []byte // the request body to send instead of go-openai's
	chat   bool   // a chat completion: its body is ours to read
	keep   bool   // a 2xx body go-openai decodes, kept in raw too (the models list)
	stream bool
	status int
	header http.Header
	raw    []byte // a plain 2xx body, or an error body's first maxErrorBody bytes
	rawCut int64  // an error body longer than raw: its size, -1 when unknown; 0: raw is whole
	// stall, when > 0, bounds the silence of a 2xx stream's body: abort
	// cancels the attempt with errStalled (see idleBody).
	stall time.Duration
	abort context.CancelCauseFunc
}

type exchangeKey struct{}

func withExchange(ctx context.Context, ex *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, ex)
}

// doer is the HTTPDoer go-openai sends through.
type doer struct {
	next openai.HTTPDoer
	key  apiKey // redacted from the response's header values
}

var _ openai.HTTPDoer = (*doer)(nil)

// emptyObject is what go-openai decodes in place of a plain 2xx body: its
// ChatCompletionResponse would fail on shapes we accept, and we decode the
// real body ourselves.
var emptyObject = []byte("{}")

func (d *doer) Do(req *http.Request) (*http.Response, error) {
	ex, _ := req.Context().Value(exchangeKey{}).(*exchange)
	if ex == nil {
		return d.next.Do(req)
	}
	if ex.body != nil {
		body := ex.body
		req.Body = io.NopCloser(bytes.NewReader(body))
		req.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
		req.ContentLength = int64(len(body))
	}
	resp, err := d.next.Do(req)
	if err != nil {
		return nil, err
	}
	d.key.redactHeader(resp.Header)
	ex.status, ex.header = resp.StatusCode, resp.Header
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	if ok && ex.keep {
		raw, err := io.ReadAll(io.LimitReader(resp.Body, maxModelsBody))
		resp.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("read response body (status %d): %w", resp.StatusCode, err)
		}
		ex.raw = raw
		resp.Body = io.NopCloser(bytes.NewReader(raw))
		return resp, nil
	}
	if ok && (!ex.chat || ex.stream) {
		// go-openai decodes a models list itself, and reads an SSE body
		// line by line for RecvRaw to hand us each chunk.
		if ex.stream && ex.stall > 0 {
			resp.Body = watchIdle(resp.Body, ex.stall, func() { ex.abort(errStalled) })
		}
		return resp, nil
	}
	var raw []byte
	if ok {
		raw, err = io.ReadAll(resp.Body)
	} else {
		// An error body is read up to a bound; a 10 MB page is not read
		// (nor kept) whole on every attempt.
		raw, err = io.ReadAll(io.LimitReader(resp.Body, maxErrorBody+1))
		if len(raw) > maxErrorBody {
			raw, ex.rawCut = raw[:maxErrorBody], resp.ContentLength
			if ex.rawCut <= 0 {
				ex.rawCut = -1
			}
		}
	}
	resp.Body.Close()
	if err != nil {
		return nil, fmt.Errorf("read response body (status %d): %w", resp.StatusCode, err)
	}
	ex.raw = raw
	if ok {
		resp.Body = io.NopCloser(bytes.NewReader(emptyObject))
	} else {
		resp.Body = io.NopCloser(bytes.NewReader(raw))
	}
	return resp, nil
}

// idleBody is a streamed body whose silence is watched: when no byte has
// arrived for limit, abort cancels the request, which ends the Read that
// waits. Bytes are what count, not chunks: a keep-alive comment from a
// server whose queue holds the request shows that the peer is alive.
type idleBody struct {
	io.ReadCloser
	limit time.Duration
	now   func() time.Duration // monotonic time since the watch began
	last  atomic.Int64         // now() at the last byte, in ns
	timer *time.Timer
	abort func()
}

func watchIdle(body io.ReadCloser, limit time.Duration, abort func()) *idleBody {
	began := time.Now()
	b := &idleBody{ReadCloser: body, limit: limit, abort: abort, now: func() time.Duration { return time.Since(began) }}
	// Armed after the field is set: check reads b.timer.
	b.timer = time.AfterFunc(time.Duration(math.MaxInt64), b.check)
	b.timer.Reset(limit)
	return b
}

func (b *idleBody) Read(p []byte) (int, error) {
	n, err := b.ReadCloser.Read(p)
	if n > 0 {
		b.last.Store(int64(b.now()))
	}
	return n, err
}

// check runs when the timer fires: the stream stalled if nothing came for
// limit, else the timer waits for what is left of limit since the last byte.
// One store per Read and one timer per stream: no timer reset per chunk.
func (b *idleBody) check() {
	idle := b.now() - time.Duration(b.last.Load())
	if idle >= b.limit {
		b.abort()
		return
	}
	b.timer.Reset(b.limit - idle)
}

func (b *idleBody) Close() error {
	b.timer.Stop()
	return b.ReadCloser.Close()
}

// encodeRequest builds the exact JSON body of a chat completion request:
// model, messages, max_tokens (when > 0), temperature (always, 0 included),
// top_p (when > 0), stream, stream_options when streaming, then Extra's keys
// in sorted order, then the row's Params in sorted order, each replacing the
// field of the same name.
func encodeRequest(req wireRequest) ([]byte, error) {
	if _, ok := req.Extra["stream"]; ok {
		return nil, errors.New(`extra_body: "stream" is set by generation.stream, not extra_body`)
	}
	for _, k := range []string{"stream", "stream_options", "model", "messages"} {
		if _, ok := req.Params[k]; ok {
			return nil, fmt.Errorf("the row's %q cannot replace the job's", k)
		}
	}
	if math.IsNaN(req.Temperature) || math.IsInf(req.Temperature, 0) {
		return nil, fmt.Errorf("temperature: %v is not a JSON number", req.Temperature)
	}
	if math.IsNaN(req.TopP) || math.IsInf(req.TopP, 0) {
		return nil, fmt.Errorf("top_p: %v is not a JSON number", req.TopP)
	}
	n := 128
	for _, m := range req.Messages {
		n += len(m.Role) + len(m.Content) + 32
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	first := true
	key := func(k string) bool {
		if _, over := req.Extra[k]; over || req.rowHas(k) {
			return false
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, k)
		b = append(b, ':')
		return true
	}
	if key("model") {
		b = appendString(b, req.Model)
	}
	if key("messages") {
		b = append(b, '[')
		for i, m := range req.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = appendString(b, m.Role)
			b = append(b, `,"content":`...)
			b = appendString(b, m.Content)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if req.MaxTokens > 0 && key("max_tokens") {
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	if key("temperature") {
		b = strconv.AppendFloat(b, req.Temperature, 'g', -1, 64)
	}
	if req.TopP > 0 && key("top_p") {
		b = strconv.AppendFloat(b, req.TopP, 'g', -1, 64)
	}
	if key("stream") {
		b = strconv.AppendBool(b, req.Stream)
	}
	if req.Stream && key("stream_options") {
		b = append(b, `{"include_usage":true}`...)
	}
	var err error
	if b, first, err = appendFields(b, first, "extra_body.", req.Extra, req.rowHas); err != nil {
		return nil, err
	}
	if b, _, err = appendFields(b, first, "the row's ", req.Params, nil); err != nil {
		return nil, err
	}
	b = append(b, '}')
	return b, nil
}

// rowHas says whether the row's own fields replace the job's field k. The
// two spellings of the answer's length are one setting: a row that says
// max_completion_tokens replaces the job's max_tokens too, or the server
// would get both and vLLM would take the job's max_completion_tokens over
// the row's max_tokens.
func (req *wireRequest) rowHas(k string) bool {
	if len(req.Params) == 0 {
		return false
	}
	if _, ok := req.Params[k]; ok {
		return true
	}
	switch k {
	case "max_tokens":
		_, ok := req.Params["max_completion_tokens"]
		return ok
	case "max_completion_tokens":
		_, ok := req.Params["max_tokens"]
		return ok
	}
	return false
}

// appendFields appends the fields of m in key order, but those skip says
// another source replaces; what names them in an error.
func appendFields(b []byte, first bool, what string, m map[string]any, skip func(string) bool) ([]byte, bool, error) {
	if len(m) == 0 {
		return b, first, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if skip == nil || !skip(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, err := json.Marshal(m[k])
		if err != nil {
			return b, first, fmt.Errorf("%s%s: %w", what, k, err)
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = appendString(b, k)
		b = append(b, ':')
		b = append(b, v...)
	}
	return b, first, nil
}

const hexDigits = "0123456789abcdef"

// appendString appends s as a JSON string: quotes, backslashes and control
// characters escaped, invalid UTF-8 replaced by U+FFFD (as encoding/json
// does), everything else verbatim, including <, > and & (the body is not
// HTML).
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '"', '\\':
				b = append(b, '\\', c)
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
