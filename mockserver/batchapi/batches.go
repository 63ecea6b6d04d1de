package batchapi

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"slices"
	"sync"
	"time"
)

// Counts is a batch's request_counts.
type Counts struct {
	Total     int `json:"total"`
	Completed int `json:"completed"`
	Failed    int `json:"failed"`
}

// Errors is a batch's errors: why it failed validation.
type Errors struct {
	Object string       `json:"object"`
	Data   []*LineError `json:"data"`
}

// Batch is the batch object OpenAI answers.
type Batch struct {
	ID               string            `json:"id"`
	Object           string            `json:"object"`
	Endpoint         string            `json:"endpoint"`
	Errors           *Errors           `json:"errors"`
	InputFileID      string            `json:"input_file_id"`
	CompletionWindow string            `json:"completion_window"`
	Status           string            `json:"status"`
	OutputFileID     *string           `json:"output_file_id"`
	ErrorFileID      *string           `json:"error_file_id"`
	CreatedAt        int64             `json:"created_at"`
	InProgressAt     *int64            `json:"in_progress_at"`
	ExpiresAt        int64             `json:"expires_at"`
	FinalizingAt     *int64            `json:"finalizing_at"`
	CompletedAt      *int64            `json:"completed_at"`
	FailedAt         *int64            `json:"failed_at"`
	ExpiredAt        *int64            `json:"expired_at"`
	CancellingAt     *int64            `json:"cancelling_at"`
	CancelledAt      *int64            `json:"cancelled_at"`
	RequestCounts    Counts            `json:"request_counts"`
	Metadata         map[string]string `json:"metadata"`
}

// batch is a stored batch: its object and what its state machine needs.
type batch struct {
	mu    sync.Mutex
	b     Batch
	input []byte
	since time.Time // when the current state began, on the clock
	lines []Line
	out   []byte // output file lines so far
	errs  []byte // error file lines so far
	done  int    // lines counted, in order

	answers []*answer  // by line, filled by work; nil: not yet
	ready   *sync.Cond // on mu: an answer came
	stop    bool       // the batch ended: work answers no more lines

	failValidation bool // Options.FailValidation: fail as if line 1 were malformed
}

// answer is one line's answer.
type answer struct {
	status int
	body   []byte
}

type createRequest struct {
	InputFileID      string            `json:"input_file_id"`
	Endpoint         string            `json:"endpoint"`
	CompletionWindow string            `json:"completion_window"`
	Metadata         map[string]string `json:"metadata"`
}

// checkCreate says what is wrong with a create request, and which field.
func (h *Handler) checkCreate(c createRequest) (*file, string, string) {
	h.mu.Lock()
	f := h.files[c.InputFileID]
	h.mu.Unlock()
	switch {
	case c.InputFileID == "":
		return nil, "Missing required parameter: 'input_file_id'.", "input_file_id"
	case f == nil:
		return nil, "No such File object: " + c.InputFileID, "input_file_id"
	case f.Purpose != "batch":
		return nil, fmt.Sprintf("The file %s has purpose %q; a batch's input needs purpose 'batch'.", f.ID, f.Purpose), "input_file_id"
	case c.Endpoint != Endpoint:
		return nil, fmt.Sprintf("Invalid value for 'endpoint': %q; this server supports %s.", c.Endpoint, Endpoint), "endpoint"
	case c.CompletionWindow != Window:
		return nil, fmt.Sprintf("Invalid value for 'completion_window': %q; only %s is supported.", c.CompletionWindow, Window), "completion_window"
	case len(c.Metadata) > 16:
		return nil, "metadata holds at most 16 pairs", "metadata"
	}
	for k, v := range c.Metadata {
		if len(k) > 64 || len(v) > 512 {
			return nil, fmt.Sprintf("metadata key %.64q: keys are at most 64 characters, values 512", k), "metadata"
		}
	}
	return f, "", ""
}

// createBatch serves POST /v1/batches.
func (h *Handler) createBatch(w http.ResponseWriter, r *http.Request) {
	var c createRequest
	if err := json.NewDecoder(http.MaxBytesReader(w, r.Body, 1<<20)).Decode(&c); err != nil {
		writeError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+err.Error(), "")
		return
	}
	f, msg, param := h.checkCreate(c)
	if f == nil {
		status := http.StatusBadRequest
		if param == "input_file_id" && c.InputFileID != "" && msg[0] == 'N' {
			status = http.StatusNotFound
		}
		writeError(w, status, msg, param)
		return
	}
	h.mu.Lock()
	hold, after := h.create, h.created
	h.mu.Unlock()
	if !after && !hold.wait(r.Context()) {
		return
	}
	now := h.opts.Clock()
	b := &batch{input: f.data, since: now, b: Batch{ID: h.newID("batch_"), Object: "batch", Endpoint: c.Endpoint,
		InputFileID: f.ID, CompletionWindow: c.CompletionWindow, Status: "validating", CreatedAt: now.Unix(),
		ExpiresAt: now.Add(h.opts.Expire).Unix(), Metadata: c.Metadata}}
	b.ready = sync.NewCond(&b.mu)
	created := b.b // as created: a look may move b on from here
	h.mu.Lock()
	h.batches[b.b.ID] = b
	h.order = append(h.order, b)
	b.failValidation = len(h.order) <= h.opts.FailValidation
	h.mu.Unlock()
	if h.wall {
		// A server works on a batch whether or not anyone looks: once
		// validated, its lines start being answered, not at the next poll.
		time.AfterFunc(h.opts.Validating, func() { h.look(b) })
	}
	if after && !hold.wait(r.Context()) {
		return
	}
	writeJSON(w, http.StatusOK, created)
}

// lookupBatch returns the batch r's path names, moved on to now, or
// answers 404.
func (h *Handler) lookupBatch(w http.ResponseWriter, r *http.Request) *batch {
	h.mu.Lock()
	b := h.batches[r.PathValue("id")]
	h.mu.Unlock()
	if b == nil {
		writeError(w, http.StatusNotFound, "No such Batch object: "+r.PathValue("id"), "id")
	}
	return b
}

func (h *Handler) getBatch(w http.ResponseWriter, r *http.Request) {
	if b := h.lookupBatch(w, r); b != nil {
		writeJSON(w, http.StatusOK, h.look(b))
	}
}

// cancelBatch serves POST /v1/batches/{id}/cancel.
func (h *Handler) cancelBatch(w http.ResponseWriter, r *http.Request) {
	b := h.lookupBatch(w, r)
	if b == nil {
		return
	}
	h.look(b)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.b.Status {
	case "validating", "in_progress", "finalizing":
		now := h.opts.Clock()
		b.b.Status, b.b.CancellingAt, b.since = "cancelling", unix(now), now
	case "cancelling", "cancelled":
	default:
		writeError(w, http.StatusConflict, fmt.Sprintf("Cannot cancel a batch with status %s.", b.b.Status), "")
		return
	}
	writeJSON(w, http.StatusOK, b.b)
}

// listBatches serves GET /v1/batches, newest first.
func (h *Handler) listBatches(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	bs := slices.Clone(h.order)
	h.mu.Unlock()
	slices.Reverse(bs)
	l, err := page(r, bs, func(b *batch) string { return b.b.ID }, 20, 100)
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error(), "limit")
		return
	}
	out := list[Batch]{Object: l.Object, Data: []Batch{}, FirstID: l.FirstID, LastID: l.LastID, HasMore: l.HasMore}
	for _, b := range l.Data {
		out.Data = append(out.Data, h.look(b))
	}
	writeJSON(w, http.StatusOK, out)
}

func unix(t time.Time) *int64 { u := t.Unix(); return &u }

// look moves b through the states its time on the clock has reached and
// returns a copy of its object.
func (h *Handler) look(b *batch) Batch {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := h.opts.Clock()
	for h.step(b, now) {
	}
	return b.b
}

// step makes one state change of b due by now, and reports whether it did.
func (h *Handler) step(b *batch, now time.Time) bool {
	o := h.opts
	due := func(d time.Duration) (time.Time, bool) { t := b.since.Add(d); return t, !now.Before(t) }
	expires := time.Unix(b.b.ExpiresAt, 0)
	expired := func() bool {
		if now.Before(expires) {
			return false
		}
		h.finish(b, "expired", expires, &b.b.ExpiredAt) // what was answered is kept, as OpenAI keeps it
		return true
	}
	switch b.b.Status {
	case "validating":
		t, ok := due(o.Validating)
		if !ok || !t.Before(expires) {
			return expired()
		}
		lines, errs := parseInput(b.input, b.b.Endpoint, o.MaxRequests)
		if b.failValidation && len(errs) == 0 {
			errs = append(errs, lineError(1, "invalid_json_line", "", "This line is not parseable as valid JSON. (The mock fails the first batches' validation on purpose: --batch-fail-validation.)"))
		}
		if len(errs) > 0 {
			b.b.Status, b.b.FailedAt, b.b.Errors = "failed", unix(t), &Errors{Object: "list", Data: errs}
			return true
		}
		b.lines, b.b.RequestCounts.Total, b.answers = lines, len(lines), make([]*answer, len(lines))
		b.b.Status, b.b.InProgressAt, b.since = "in_progress", unix(t), t
		go h.work(b, lines)
		return true
	case "in_progress":
		upTo := now
		if upTo.After(expires) {
			upTo = expires
		}
		h.count(b, upTo)
		t, ok := due(o.InProgress)
		if !ok || b.done < len(b.lines) || !t.Before(expires) {
			return expired()
		}
		b.b.Status, b.b.FinalizingAt, b.since = "finalizing", unix(t), t
		return true
	case "finalizing":
		if t, ok := due(o.Finalizing); ok {
			h.finish(b, "completed", t, &b.b.CompletedAt)
			return true
		}
	case "cancelling":
		if t, ok := due(o.Finalizing); ok {
			h.finish(b, "cancelled", t, &b.b.CancelledAt)
			return true
		}
	}
	return false
}

// work answers lines ahead of the clock, Parallel at once, each line
// within LineTimeout, so that a look rarely waits for one.
func (h *Handler) work(b *batch, lines []Line) {
	sem := make(chan struct{}, h.opts.Parallel)
	var wg sync.WaitGroup
	for i, l := range lines {
		b.mu.Lock()
		stop := b.stop
		b.mu.Unlock()
		if stop {
			break
		}
		sem <- struct{}{}
		wg.Go(func() {
			defer func() { <-sem }()
			a := &answer{status: http.StatusInternalServerError, body: failBody}
			if share := h.opts.FailShare; math.Floor(float64(i+1)*share) == math.Floor(float64(i)*share) {
				ctx, cancel := context.WithTimeout(context.Background(), h.opts.LineTimeout)
				a.status, a.body = h.opts.Answer(ctx, l.Body)
				cancel()
			}
			if !json.Valid(a.body) { // cut short, or not JSON: the line failed
				a.status, a.body = http.StatusInternalServerError, failBody
			}
			b.mu.Lock()
			if !b.stop {
				b.answers[i] = a
				b.ready.Broadcast()
			}
			b.mu.Unlock()
		})
	}
	wg.Wait()
}

// count counts b's answers in order up to the share of InProgress gone by
// now, waiting for work where it is behind (not on the wall clock). b.mu
// is held.
func (h *Handler) count(b *batch, now time.Time) {
	if now.Before(b.since) {
		return
	}
	want := len(b.lines)
	if d := h.opts.InProgress; d > 0 && now.Sub(b.since) < d {
		want = int(float64(len(b.lines)) * float64(now.Sub(b.since)) / float64(d))
	}
	for ; b.done < want; b.done++ {
		for b.answers[b.done] == nil {
			if h.wall {
				return
			}
			b.ready.Wait()
		}
		a := b.answers[b.done]
		out := outputLine{ID: h.newID("batch_req_"), CustomID: b.lines[b.done].CustomID,
			Response: &response{StatusCode: a.status, RequestID: h.newID("req_"), Body: a.body}}
		line, _ := json.Marshal(out) // valid JSON always marshals
		line = append(line, '\n')
		if a.status == http.StatusOK {
			b.out = append(b.out, line...)
			b.b.RequestCounts.Completed++
		} else {
			b.errs = append(b.errs, line...)
			b.b.RequestCounts.Failed++
		}
	}
}

// failBody is the body of a line made to fail (Options.FailShare).
var failBody = json.RawMessage(`{"error":{"message":"The server had an error processing this request (the mock fails this share of lines on purpose: --batch-fail-rate).","type":"server_error","param":null,"code":null}}`)

type response struct {
	StatusCode int             `json:"status_code"`
	RequestID  string          `json:"request_id"`
	Body       json.RawMessage `json:"body"`
}

type outputLine struct {
	ID       string    `json:"id"`
	CustomID string    `json:"custom_id"`
	Response *response `json:"response"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
}

// finish ends b in status at t, storing its output and error files.
func (h *Handler) finish(b *batch, status string, t time.Time, at **int64) {
	b.b.Status, *at, b.since = status, unix(t), t
	if len(b.out) > 0 {
		b.b.OutputFileID = &h.addFile(b.b.ID+"_output.jsonl", "batch_output", b.out).ID
	}
	if len(b.errs) > 0 {
		b.b.ErrorFileID = &h.addFile(b.b.ID+"_error.jsonl", "batch_output", b.errs).ID
	}
	b.out, b.errs, b.lines, b.answers, b.stop = nil, nil, nil, nil, true
}

// Submitted counts, over every batch created, the lines of its input with
// each custom_id: a client that never submits a row twice has all ones.
func (h *Handler) Submitted() map[string]int {
	h.mu.Lock()
	bs := slices.Clone(h.order)
	h.mu.Unlock()
	n := map[string]int{}
	for _, b := range bs {
		for line := range bytes.Lines(b.input) {
			var l Line
			if json.Unmarshal(line, &l) == nil && l.CustomID != "" {
				n[l.CustomID]++
			}
		}
	}
	return n
}
