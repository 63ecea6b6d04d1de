package mockserver

import (
	"io"
	"net/http"
	"strconv"
	"time"

	"github.com/synthgen/synthgen/mockserver/tokenids"
)

// maxBodyBytes bounds a request body: the longest real prompts are far below.
const maxBodyBytes = 32 << 20

// writeChunkBytes is how much streamed output is gathered before it is handed
// to the connection when no pause forces an earlier flush.
const writeChunkBytes = 8 << 10

// Pre-encoded pieces of chunk frames; see appendChunkHead for the rest.
var (
	roleDelta  = []byte(`{"role":"assistant","content":""}`)
	emptyDelta = []byte(`{"content":""}`)
	tailNone   = []byte(`,"logprobs":null,"finish_reason":null}]}` + "\n\n")
	tailStop   = []byte(`,"logprobs":null,"finish_reason":"stop","stop_reason":null}]}` + "\n\n")
	tailLength = []byte(`,"logprobs":null,"finish_reason":"length","stop_reason":null}]}` + "\n\n")
	doneFrame  = []byte("data: [DONE]\n\n")
)

// handleChat serves POST /v1/chat/completions, plain or streamed.
func (s *Server) handleChat(w http.ResponseWriter, r *http.Request) {
	bp := s.bufs.Get().(*[]byte)
	defer func() {
		if cap(*bp) <= 1<<20 { // a huge prompt's buffer is not worth keeping
			s.bufs.Put(bp)
		}
	}()
	req, shape, ok := s.readChat(w, r, bp)
	if !ok {
		return
	}
	if s.refuseLimited(w, &req) {
		return
	}
	s.requests.Add(1)
	if s.refuseTooLong(w, &req) {
		return
	}

	g := &generation{
		s: s, w: w, done: r.Context().Done(), buf: (*bp)[:0],
		id: s.idSeq.Add(1), created: time.Now().Unix(), stallAt: -1, faultAt: -1,
	}
	if n := uint64(s.opts.RestartEvery); n > 0 && g.id%n == 0 {
		select {
		case s.restart <- struct{}{}: // Serve cuts this request too
		default:
		}
	}
	stalls := s.stalls(g.id)
	if !stalls {
		g.fault = s.fault(g.id)
	}
	if s.failEarly(w, g.fault) {
		return
	}
	if req.Stream && !s.opts.HeadersWhenRunning {
		// vLLM sends the headers as soon as it accepts the request; the body
		// waits for the engine.
		g.startStream() // a client already gone is seen while waiting for a slot
	}
	prompt := req.promptTokens()
	var admitted bool
	if s.batch != nil {
		g.seq = &seq{prompt: prompt}
		admitted = s.batch.acquire(g.seq, g.done)
	} else {
		admitted = s.acquire(g.done)
	}
	if !admitted {
		s.abort(w, g.done)
		return
	}
	g.running = true
	defer g.release()
	if req.Stream && s.opts.HeadersWhenRunning {
		g.startStream() // llama.cpp's way: no byte while queued
	}
	s.promptTokens.Add(int64(prompt))
	s.prefix.lookup(req.Messages)
	g.start = time.Now()
	g.toks = tokenids.NewReply(&req.Fields, s.opts.IgnoreTokenIDs, req.promptHash(), req.contents())
	if t := req.toolReply(); t != nil {
		if !g.tools(t, prompt, req.Stream, req.includeUsage()) {
			g.release()
			s.abort(w, g.done)
		}
		*bp = g.buf[:0]
		return
	}

	if n := req.choices(s.opts.IgnoreN); n > 1 {
		ok = g.answerN(&req, shape, n, prompt)
	} else {
		ok = g.answer(&req, shape, prompt, stalls)
	}
	*bp = g.buf[:0]
	// The slot is free before the outcome is counted (finish frees it
	// before it counts an answer): whoever reads Aborted or Faulted then
	// sees the request no longer running.
	g.release()
	if !ok && g.faulted {
		s.inject(g.fault)
		s.faulted.Add(1)
	} else if !ok {
		s.abort(w, g.done)
	} else if s.closesAfter(g.id) {
		s.closeAfter(w, r, req.Stream)
	}
}

// readChat reads and checks a request (its body read into *bp), or
// answers its refusal and returns false.
func (s *Server) readChat(w http.ResponseWriter, r *http.Request, bp *[]byte) (chatRequest, *answerShape, bool) {
	body, err := readBody(http.MaxBytesReader(w, r.Body, maxBodyBytes), (*bp)[:0])
	*bp = body[:0]
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", "read request body: "+err.Error(), "")
		return chatRequest{}, nil, false
	}
	req, err := parseRequest(body)
	var shape *answerShape
	if err == nil {
		shape, err = req.requestShape()
	}
	if err != nil {
		writeError(w, http.StatusBadRequest, "BadRequestError", err.Error(), "")
		return req, nil, false
	}
	if req.Model != "" && req.Model != s.opts.Model {
		writeError(w, http.StatusNotFound, "NotFoundError", "The model `"+req.Model+"` does not exist.", "model")
		return req, nil, false
	}
	return req, shape, true
}

// answer plans req's ordinary answer (its length, its shape, its stall
// or fault) and sends it; false when it did not finish.
func (g *generation) answer(req *chatRequest, shape *answerShape, prompt int, stalls bool) bool {
	s := g.s
	p := newPlan(s.opts.Seed, req.promptHash(), s.opts.MeanTokens, req.limit())
	if shape != nil {
		s.shapeAnswer(&p, shape, req.promptHash(), g.id, req.limit())
	}
	s.fitContext(&p, prompt)
	if stalls {
		g.stallAt = min(s.opts.StallAfter, p.total)
		if !req.Stream {
			g.stallAt = 0
		}
	}
	switch g.fault {
	case FaultLength:
		p.total, p.finish = req.limit(), "length"
		p.reasoning = min(p.reasoning, max(p.total-1, 0))
		s.inject(FaultLength)
	case FaultResetMid, FaultBadChunk, FaultCut:
		g.faultAt = p.total / 2
	}
	if req.Stream {
		return g.stream(&p, prompt, req.includeUsage())
	}
	return g.plain(&p, prompt)
}

// startStream sends a stream's status line and headers.
func (g *generation) startStream() {
	g.w.Header().Set("Content-Type", "text/event-stream; charset=utf-8")
	g.w.WriteHeader(http.StatusOK)
	_ = g.flush()
}

// generation is one answer being produced: its output buffer, its pacing and
// the tokens not yet published to the counters.
type generation struct {
	s       *Server
	w       http.ResponseWriter
	id      uint64 // with the server's prefix, the chatcmpl- id
	created int64
	done    <-chan struct{}
	buf     []byte
	start   time.Time
	timer   *time.Timer // made on the first pause and reused: one per request
	seq     *seq        // its place in the batch model; nil when off
	due     time.Time   // under the batch model: when the current token is due
	pending int64
	running bool
	stallAt int // the token before which the answer stalls; -1: never
	fault   string
	faultAt int             // the token before which a mid-answer fault strikes; -1: never
	faulted bool            // the answer ended in its fault
	toks    *tokenids.Reply // the token ids and logprobs asked for; nil: none
}

// strike ends the answer with its mid-answer fault (what was gathered
// reaches the client first); it always returns false.
func (g *generation) strike(stream bool) bool {
	g.faulted = true
	g.publish()
	switch g.fault {
	case FaultResetMid:
		if g.write() == nil {
			reset(g.w)
		}
	case FaultBadChunk:
		if stream {
			// A chunk cut off in the middle of its JSON, then the end.
			g.buf = g.appendChunkHead(g.buf)
			g.buf = append(g.buf, `{"content":"tr`...)
			g.buf = append(g.buf, "\n\n"...)
			g.buf = append(g.buf, doneFrame...)
		} else {
			g.buf = g.buf[:len(g.buf)/2] // a 200 whose JSON stops halfway
			g.w.Header().Set("Content-Type", "application/json")
		}
		_ = g.write()
	case FaultCut:
		if stream {
			g.buf = append(g.buf, doneFrame...) // [DONE] with no finish_reason before it
		} else {
			g.buf = g.buf[:0]
			g.buf = g.appendEnvelope(g.buf, "chat.completion")
			g.buf = append(g.buf, `"choices":[{"index":0,"message":{"role":"assistant","content":"cut"},"logprobs":null,"finish_reason":null}]}`...)
			g.w.Header().Set("Content-Type", "application/json")
		}
		_ = g.write()
	}
	g.release()
	return false
}

// pause waits until token i is due (TTFT, then one TokenDelay per token)
// when pacing is on. Output gathered so far reaches the client first, and
// the generated tokens reach the counters, so a scrape during a long answer
// sees progress. It returns false when the client has gone.
func (g *generation) pause(i int, stream bool) bool {
	if g.seq != nil {
		return g.batchPause(i, stream)
	}
	o := &g.s.opts
	if o.TTFT == 0 && o.TokenDelay == 0 {
		return true
	}
	return g.sleepUntil(g.start.Add(o.TTFT+time.Duration(i)*o.TokenDelay), stream)
}

// stall holds the request open without a byte until the client goes away
// (what was gathered reaches it first); it always returns false: the answer
// is never finished.
func (g *generation) stall(stream bool) bool {
	g.s.stalled.Add(1)
	g.publish()
	if stream {
		_ = g.flush()
	}
	<-g.done
	return false
}

// publish adds the tokens generated since the last call to the counters:
// as they are produced, or with CountTokensAtEnd only when the answer is
// finished (finish), so that an answer that never is counts nothing.
func (g *generation) publish() {
	if !g.s.opts.CountTokensAtEnd {
		g.count()
	}
}

func (g *generation) count() {
	g.s.genTokens.Add(g.pending)
	g.pending = 0
}

// finish publishes a complete answer and frees its slot before the last
// bytes go out, as vLLM does: a client that has read the whole answer then
// sees the counters already include it.
func (g *generation) finish(reason string) {
	g.count()
	g.s.completed.Add(1)
	g.s.success.WithLabelValues(reason).Inc()
	g.release()
}

func (g *generation) release() {
	if g.running {
		g.running = false
		g.publish()
		g.s.release(g.seq)
	}
}

// write hands the gathered output to the connection.
func (g *generation) write() error {
	if len(g.buf) == 0 {
		return nil
	}
	_, err := g.w.Write(g.buf)
	g.buf = g.buf[:0]
	return err
}

// flush writes and pushes everything to the client now. Every writer
// net/http and httptest hand out can flush; one that cannot just buffers.
func (g *generation) flush() error {
	if err := g.write(); err != nil {
		return err
	}
	if f, ok := g.w.(http.Flusher); ok {
		f.Flush()
	}
	return nil
}

// stream sends the answer as vLLM's SSE chunks: the role, one chunk per
// token (reasoning first, then content), the finish reason, the usage when
// asked for, then [DONE]. Output is flushed before every pause, so each
// chunk reaches the client when it is due; without pacing (TokenDelay and
// TTFT 0) chunks go out in writeChunkBytes batches, which a client cannot
// tell apart from a fast server but costs far fewer syscalls. It returns false when the client went away before
// the answer was complete.
func (g *generation) stream(p *plan, prompt int, usage bool) bool {
	s := g.s
	var headArr [192]byte
	head := g.appendChunkHead(headArr[:0])
	for i := range p.total {
		if !g.pause(i, true) {
			return false
		}
		if i == g.stallAt {
			return g.stall(true)
		}
		if i == g.faultAt && i > 0 {
			return g.strike(true)
		}
		if i == 0 {
			g.buf = append(g.buf, head...)
			g.buf = append(g.buf, roleDelta...)
			if g.toks != nil {
				g.buf = g.toks.AppendRoleTail(g.buf)
			} else {
				g.buf = append(g.buf, tailNone...)
			}
		}
		t := p.next()
		g.buf = append(g.buf, head...)
		k, shaped := p.piece(i)
		switch none := s.opts.ReasoningField == FieldNone; {
		case none && i == 0:
			g.buf = append(g.buf, s.tok.openTag[t]...)
		case shaped && none && k == 0:
			g.buf = append(g.buf, p.shaped.closing[0]...)
		case shaped:
			g.buf = append(g.buf, p.shaped.content[k]...)
		case none && i == p.reasoning:
			g.buf = append(g.buf, s.tok.closeTag[t]...)
		case i < p.reasoning:
			g.buf = append(g.buf, s.tok.reason[t]...)
		default:
			g.buf = append(g.buf, s.tok.content[t]...)
		}
		switch length := i == p.total-1 && p.finish == "length"; {
		case g.toks != nil:
			g.buf = g.toks.AppendTokenTail(g.buf, i, t, length)
		case length:
			g.buf = append(g.buf, tailLength...)
		default:
			g.buf = append(g.buf, tailNone...)
		}
		g.pending++
		if len(g.buf) >= writeChunkBytes && g.write() != nil {
			return false
		}
	}
	if g.stallAt == p.total {
		return g.stall(true) // every token sent, but no finish_reason
	}
	if g.faultAt >= 0 {
		return g.strike(true) // an answer too short to strike halfway
	}
	if p.finish == "stop" {
		// The end-of-sequence token shows as an empty delta carrying the reason.
		g.buf = append(g.buf, head...)
		g.buf = append(g.buf, emptyDelta...)
		g.buf = append(g.buf, tailStop...)
	}
	if usage {
		g.buf = append(g.buf, "data: "...)
		g.buf = g.appendEnvelope(g.buf, "chat.completion.chunk")
		g.buf = append(g.buf, `"choices":[],"usage":`...)
		g.buf = appendUsage(g.buf, prompt, p.total, false, g.s.cached(prompt))
		g.buf = append(g.buf, "}\n\n"...)
	}
	g.buf = append(g.buf, doneFrame...)
	g.finish(p.finish)
	_ = g.flush() // the answer is counted: a client gone now is not an abort
	return true
}

// plain sends the answer as one chat.completion object. It returns false
// when the client went away before the answer was complete.
func (g *generation) plain(p *plan, prompt int) bool {
	s := g.s
	field := s.opts.ReasoningField
	g.buf = g.appendEnvelope(g.buf, "chat.completion")
	g.buf = append(g.buf, `"choices":[{"index":0,"message":{"role":"assistant","`...)
	if field == FieldNone {
		g.buf = append(g.buf, `content":"`...)
	} else {
		if field == FieldReasoningContent {
			g.buf = append(g.buf, FieldReasoningContent...)
		} else {
			g.buf = append(g.buf, FieldReasoning...)
		}
		g.buf = append(g.buf, `":"`...)
	}
	reasonStart := len(g.buf)
	if g.stallAt == 0 {
		return g.stall(false)
	}
	for i := range p.total {
		if !g.pause(i, false) {
			return false
		}
		if i == p.reasoning && field != FieldNone {
			g.endReasoning(reasonStart)
		}
		if field == FieldNone && i == 0 {
			g.buf = append(g.buf, escapedOpen...)
		}
		if field == FieldNone && i == p.reasoning {
			g.buf = append(g.buf, escapedClose...)
		}
		t := p.next()
		if k, shaped := p.piece(i); shaped {
			g.buf = append(g.buf, p.shaped.escaped[k]...)
		} else {
			g.buf = append(g.buf, s.tok.escaped[t]...)
		}
		g.toks.Note(t)
		g.pending++
	}
	if p.reasoning == p.total && field != FieldNone { // no content token was generated
		g.endReasoning(reasonStart)
	}
	if g.faultAt >= 0 {
		return g.strike(false)
	}
	g.buf = append(g.buf, `","tool_calls":[]},"logprobs":`...)
	g.buf = g.toks.AppendChoiceLogprobs(g.buf)
	g.buf = append(g.buf, `,"finish_reason":"`...)
	g.buf = append(g.buf, p.finish...)
	g.buf = append(g.buf, `","stop_reason":null`...)
	g.buf = g.toks.AppendChoiceIDs(g.buf)
	g.buf = append(g.buf, `}],"usage":`...)
	g.buf = appendUsage(g.buf, prompt, p.total, true, g.s.cached(prompt))
	g.buf = append(g.buf, `,"prompt_logprobs":null`...)
	g.buf = g.toks.AppendPromptIDs(g.buf)
	g.buf = append(g.buf, '}')
	g.finish(p.finish)

	g.w.Header().Set("Content-Type", "application/json")
	g.w.Header().Set("Content-Length", strconv.Itoa(len(g.buf)))
	_ = g.write() // the answer is counted: a client gone now is not an abort
	return true
}

// endReasoning closes the plain answer's reasoning string (copying it into
// reasoning_content too for FieldBoth) and opens the content string.
func (g *generation) endReasoning(reasonStart int) {
	if g.s.opts.ReasoningField == FieldBoth {
		end := len(g.buf)
		g.buf = append(g.buf, `","reasoning_content":"`...)
		g.buf = append(g.buf, g.buf[reasonStart:end]...)
	}
	g.buf = append(g.buf, `","content":"`...)
}

// appendChunkHead appends a stream chunk's frame up to its delta:
// `data: {"id":...,"choices":[{"index":0,"delta":`.
func (g *generation) appendChunkHead(b []byte) []byte {
	b = append(b, "data: "...)
	b = g.appendEnvelope(b, "chat.completion.chunk")
	return append(b, `"choices":[{"index":0,"delta":`...)
}

// appendEnvelope appends `{"id":"chatcmpl-...","object":OBJECT,"created":N,"model":M,`:
// every chunk of one answer carries the same id and created time.
func (g *generation) appendEnvelope(b []byte, object string) []byte {
	s := g.s
	b = append(b, `{"id":"chatcmpl-`...)
	b = appendHex(b, s.idPrefix)
	b = appendHex(b, g.id)
	b = append(b, `","object":"`...)
	b = append(b, object...)
	b = append(b, `","created":`...)
	b = strconv.AppendInt(b, g.created, 10)
	b = append(b, `,"model":`...)
	b = append(b, s.modelJSON...)
	return append(b, ',')
}

// appendUsage appends vLLM's usage object; the plain answer's carries
// prompt_tokens_details (null), the stream's usage chunk drops nulls. With
// cached >= 0 both carry it as vLLM with --enable-prompt-tokens-details
// does: {"cached_tokens":cached}.
func appendUsage(b []byte, prompt, completion int, details bool, cached int) []byte {
	b = append(b, `{"prompt_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt), 10)
	b = append(b, `,"total_tokens":`...)
	b = strconv.AppendInt(b, int64(prompt+completion), 10)
	b = append(b, `,"completion_tokens":`...)
	b = strconv.AppendInt(b, int64(completion), 10)
	switch {
	case cached >= 0:
		b = append(b, `,"prompt_tokens_details":{"cached_tokens":`...)
		b = strconv.AppendInt(b, int64(cached), 10)
		b = append(b, '}')
	case details:
		b = append(b, `,"prompt_tokens_details":null`...)
	}
	return append(b, '}')
}

// cached is the prompt tokens an answer says were cached
// (Options.CachedTokens, at most the prompt's); -1: none said.
func (s *Server) cached(prompt int) int {
	if s.opts.CachedTokens <= 0 {
		return -1
	}
	return min(s.opts.CachedTokens, prompt)
}

// appendHex appends v as 16 lowercase hex digits.
func appendHex(b []byte, v uint64) []byte {
	const digits = "0123456789abcdef"
	for shift := 60; shift >= 0; shift -= 4 {
		b = append(b, digits[(v>>uint(shift))&0xf])
	}
	return b
}

// readBody reads r to its end into b, growing it as needed.
func readBody(r io.Reader, b []byte) ([]byte, error) {
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := r.Read(b[len(b):cap(b)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
	}
}
