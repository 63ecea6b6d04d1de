// Package batchapi serves OpenAI's Files and Batch APIs for the mock server:
// files uploaded to /v1/files and kept in memory, batches created at
// /v1/batches that move validating → in_progress → finalizing → completed
// on a clock the caller controls, each input line answered by the function
// the mock passes in (its own /v1/chat/completions answer), and holds that
// let a test stop the server at a point and kill its client there.
//
// A test reaches it through the mock:
//
//	srv := mockserver.New(mockserver.Options{Batch: batchapi.Options{
//		Clock: clock, Validating: time.Minute, InProgress: time.Hour, FailShare: 0.1}})
//	hold := srv.Batches().HoldCreate(true) // or HoldContent(n)
//	<-hold.Reached()                       // the client is held: kill it
//	hold.Release()
//	srv.Batches().Submitted()              // custom_id -> times submitted
package batchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

// Limits OpenAI states for a batch's input file.
const (
	DefaultMaxRequests  = 50_000
	DefaultMaxFileBytes = 200 << 20
	// Endpoint is the one endpoint batches may name.
	Endpoint = "/v1/chat/completions"
	// Window is the one completion_window accepted.
	Window = "24h"
)

// Options configure a Handler. Durations are the time a batch spends in
// each state, read on Clock; zero moves it on at the next look.
type Options struct {
	// Validating, InProgress and Finalizing are the time a batch spends in
	// each state. request_counts grow in proportion over InProgress.
	Validating, InProgress, Finalizing time.Duration
	// Expire is how long after creation a batch not yet finalizing
	// expires (OpenAI: the 24h window). 0: 24h.
	Expire time.Duration
	// FailShare is the share (0..1) of a batch's lines answered with a
	// 500 into the error file instead of the output file; which ones is
	// fixed by their position (line i fails when ⌊(i+1)·share⌋ > ⌊i·share⌋).
	FailShare float64
	// FailValidation makes the first N batches created fail validation as
	// if their first line were malformed (invalid_json_line, line 1).
	FailValidation int
	// MaxRequests and MaxFileBytes bound an input file; 0: OpenAI's
	// 50,000 requests and 200 MB.
	MaxRequests  int
	MaxFileBytes int64
	// Parallel is how many lines are answered at once, ahead of the clock
	// (0: 16); LineTimeout bounds each (0: 10 minutes; past it the line
	// is what Answer made of its context's end, usually an error).
	Parallel    int
	LineTimeout time.Duration
	// Clock is the states' clock; nil: time.Now. On a clock given, a look
	// waits for the answers the clock has reached, so counts are exact; on
	// time.Now it never waits: the counts are the lines answered so far,
	// and in_progress lasts until every line is.
	Clock func() time.Time
	// Answer answers one line's body as POST /v1/chat/completions would,
	// not streamed: the status and the JSON body. Required.
	Answer func(ctx context.Context, body []byte) (int, []byte)
}

// Validate reports the first invalid option, naming it.
func (o Options) Validate() error {
	switch {
	case o.Validating < 0 || o.InProgress < 0 || o.Finalizing < 0 || o.Expire < 0:
		return errors.New("batch state durations must not be negative")
	case !(o.FailShare >= 0 && o.FailShare <= 1):
		return fmt.Errorf("batch fail rate %v: want 0 to 1", o.FailShare)
	case o.Parallel < 0 || o.LineTimeout < 0:
		return errors.New("batch parallel and line timeout must not be negative")
	case o.MaxRequests < 0 || o.MaxFileBytes < 0 || o.FailValidation < 0:
		return errors.New("batch file limits and fail validation must not be negative")
	}
	return nil
}

// Handler serves /v1/files and /v1/batches. Mount it at both prefixes.
type Handler struct {
	opts Options
	wall bool // Options.Clock was nil: never wait for answers
	mux  *http.ServeMux

	mu        sync.Mutex
	seq       uint64
	files     map[string]*file
	fileOrder []*file // creation order
	batches   map[string]*batch
	order     []*batch // creation order
	create    *Hold
	created   bool // create holds after storing the batch
	content   *Hold
	partial   int64 // bytes HoldContent serves before holding
}

// New returns a Handler for opts; it panics when opts.Validate fails or
// opts.Answer is nil.
func New(opts Options) *Handler {
	if err := opts.Validate(); err != nil {
		panic("batchapi: " + err.Error())
	}
	if opts.Answer == nil {
		panic("batchapi: Options.Answer is nil")
	}
	wall := opts.Clock == nil
	if wall {
		opts.Clock = time.Now
	}
	if opts.Expire == 0 {
		opts.Expire = 24 * time.Hour
	}
	if opts.Parallel == 0 {
		opts.Parallel = 16
	}
	if opts.LineTimeout == 0 {
		opts.LineTimeout = 10 * time.Minute
	}
	if opts.MaxRequests == 0 {
		opts.MaxRequests = DefaultMaxRequests
	}
	if opts.MaxFileBytes == 0 {
		opts.MaxFileBytes = DefaultMaxFileBytes
	}
	h := &Handler{opts: opts, wall: wall, mux: http.NewServeMux(), files: map[string]*file{}, batches: map[string]*batch{}}
	h.mux.HandleFunc("POST /v1/files", h.uploadFile)
	h.mux.HandleFunc("GET /v1/files", h.listFiles)
	h.mux.HandleFunc("GET /v1/files/{id}", h.getFile)
	h.mux.HandleFunc("DELETE /v1/files/{id}", h.deleteFile)
	h.mux.HandleFunc("GET /v1/files/{id}/content", h.fileContent)
	h.mux.HandleFunc("POST /v1/batches", h.createBatch)
	h.mux.HandleFunc("GET /v1/batches", h.listBatches)
	h.mux.HandleFunc("GET /v1/batches/{id}", h.getBatch)
	h.mux.HandleFunc("POST /v1/batches/{id}/cancel", h.cancelBatch)
	return h
}

// Mount registers h on mux under /v1/files and /v1/batches.
func (h *Handler) Mount(mux *http.ServeMux) {
	for _, p := range []string{"/v1/files", "/v1/files/", "/v1/batches", "/v1/batches/"} {
		mux.Handle(p, h)
	}
}

// ServeHTTP routes a request to one of the endpoints.
func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) { h.mux.ServeHTTP(w, r) }

// ViaHandler makes an Options.Answer of a chat-completions handler: it
// sends the body to chat with stream turned off and returns what it wrote.
func ViaHandler(chat http.Handler) func(context.Context, []byte) (int, []byte) {
	return func(ctx context.Context, body []byte) (status int, answer []byte) {
		defer func() {
			if recover() != nil { // a connection fault (ErrAbortHandler): no answer
				status, answer = http.StatusInternalServerError, nil
			}
		}()
		var m map[string]json.RawMessage
		if err := json.Unmarshal(body, &m); err == nil && m != nil {
			m["stream"] = json.RawMessage("false")
			delete(m, "stream_options")
			body, _ = json.Marshal(m) // raw messages from a parse always marshal
		}
		r := httptest.NewRequestWithContext(ctx, http.MethodPost, Endpoint, bytes.NewReader(body))
		r.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		chat.ServeHTTP(rec, r)
		return rec.Code, rec.Body.Bytes()
	}
}

// Hold stops the server at a point until released.
type Hold struct {
	once    sync.Once
	reached chan struct{}
	release chan struct{}
	rel     sync.Once
	waiting atomic.Int64 // requests stopped here now
}

func newHold() *Hold { return &Hold{reached: make(chan struct{}), release: make(chan struct{})} }

// Reached is closed once a request first stops at the hold.
func (g *Hold) Reached() <-chan struct{} { return g.reached }

// Release lets every request held go on, and later ones pass.
func (g *Hold) Release() { g.rel.Do(func() { close(g.release) }) }

// WaitGone waits until no request is stopped at the hold: after their
// client is killed or has given up, until the server has seen every one
// of them go (a Release before then could still let one through). It
// fails after d with how many are still there.
func (g *Hold) WaitGone(d time.Duration) error {
	for deadline := time.Now().Add(d); g.waiting.Load() > 0; time.Sleep(time.Millisecond) {
		if time.Now().After(deadline) {
			return fmt.Errorf("%d requests still held after %s", g.waiting.Load(), d)
		}
	}
	return nil
}

// wait stops at the hold until it is released (true) or ctx ends (false,
// which wins a tie).
func (g *Hold) wait(ctx context.Context) bool {
	if g == nil {
		return true
	}
	g.waiting.Add(1)
	defer g.waiting.Add(-1)
	g.once.Do(func() { close(g.reached) })
	select {
	case <-g.release:
		// Both may be ready by now, and select picks either: a request
		// whose client went while it waited is dropped, released or not.
		return ctx.Err() == nil
	case <-ctx.Done():
		return false
	}
}

// HoldCreate makes POST /v1/batches stop until the hold is released:
// before anything is created, or with afterStore after the batch is stored
// and before its id is answered (a client killed there never learns it).
func (h *Handler) HoldCreate(afterStore bool) *Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.create, h.created = newHold(), afterStore
	return h.create
}

// HoldContent makes GET /v1/files/{id}/content send the first n bytes of
// a file (with the whole length in Content-Length), flush them and stop
// until the hold is released, then send the rest.
func (h *Handler) HoldContent(n int64) *Hold {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.content, h.partial = newHold(), n
	return h.content
}

// newID returns prefix and a number unique in h.
func (h *Handler) newID(prefix string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.seq++
	return fmt.Sprintf("%s%012x%04x", prefix, rand.Uint64()>>16, h.seq)
}

// apiError is OpenAI's error body.
type apiError struct {
	Error struct {
		Message string  `json:"message"`
		Type    string  `json:"type"`
		Param   *string `json:"param"`
		Code    *string `json:"code"`
	} `json:"error"`
}

func writeError(w http.ResponseWriter, status int, msg, param string) {
	var e apiError
	e.Error.Message, e.Error.Type = msg, "invalid_request_error"
	if param != "" {
		e.Error.Param = &param
	}
	writeJSON(w, status, e)
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v) // a client gone is nothing to answer
}

// list is OpenAI's list envelope.
type list[T any] struct {
	Object  string  `json:"object"`
	Data    []T     `json:"data"`
	FirstID *string `json:"first_id"`
	LastID  *string `json:"last_id"`
	HasMore bool    `json:"has_more"`
}

// page returns the items after the one with id after (all when empty), at
// most limit of them (r's query; 1..most, default def).
func page[T any](r *http.Request, items []T, id func(T) string, def, most int) (list[T], error) {
	l := list[T]{Object: "list", Data: []T{}}
	limit := def
	if s := r.URL.Query().Get("limit"); s != "" {
		n, err := strconv.Atoi(s)
		if err != nil || n < 1 || n > most {
			return l, fmt.Errorf("limit %q: want a number from 1 to %d", s, most)
		}
		limit = n
	}
	if after := r.URL.Query().Get("after"); after != "" {
		i := slices.IndexFunc(items, func(it T) bool { return id(it) == after })
		items = items[i+1:] // an unknown cursor: nothing after it
		if i < 0 {
			items = nil
		}
	}
	if len(items) > limit {
		items, l.HasMore = items[:limit], true
	}
	l.Data = append(l.Data, items...)
	if len(items) > 0 {
		f, e := id(items[0]), id(items[len(items)-1])
		l.FirstID, l.LastID = &f, &e
	}
	return l, nil
}
