package batchapi_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/batchapi"
)

// clock is a clock the test advances: nanoseconds since 1970.
type clock struct{ ns atomic.Int64 }

func newClock() *clock                   { c := &clock{}; c.ns.Store(1.7e18); return c }
func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// env is a mock server with the batch API on a test clock.
type env struct {
	t     *testing.T
	clock *clock
	srv   *mockserver.Server
	url   string
}

var durations = batchapi.Options{Validating: time.Minute, InProgress: 10 * time.Minute, Finalizing: time.Minute}

func newEnv(t *testing.T, o batchapi.Options) *env {
	t.Helper()
	c := newClock()
	o.Clock = c.now
	s := mockserver.New(mockserver.Options{Seed: 3, MeanTokens: 8, Batch: o})
	ts := httptest.NewServer(s)
	t.Cleanup(ts.Close)
	return &env{t: t, clock: c, srv: s, url: ts.URL}
}

// do sends a request and decodes a JSON answer into out, returning the status.
func (e *env) do(ctx context.Context, method, path, ctype string, body io.Reader, out any) int {
	e.t.Helper()
	req, err := http.NewRequestWithContext(ctx, method, e.url+path, body)
	if err != nil {
		e.t.Fatal(err)
	}
	if ctype != "" {
		req.Header.Set("Content-Type", ctype)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatalf("%s %s: %v", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		e.t.Fatal(err)
	}
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			e.t.Fatalf("%s %s: %v in %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func (e *env) json(method, path string, in, out any) int {
	e.t.Helper()
	var body io.Reader
	if in != nil {
		b, _ := json.Marshal(in)
		body = bytes.NewReader(b)
	}
	return e.do(context.Background(), method, path, "application/json", body, out)
}

// upload posts data as a file with purpose and returns the status and file.
func (e *env) upload(purpose string, data []byte) (int, map[string]any) {
	e.t.Helper()
	var buf bytes.Buffer
	mw := multipart.NewWriter(&buf)
	_ = mw.WriteField("purpose", purpose)
	fw, _ := mw.CreateFormFile("file", "in.jsonl")
	_, _ = fw.Write(data)
	_ = mw.Close()
	var f map[string]any
	return e.do(context.Background(), "POST", "/v1/files", mw.FormDataContentType(), &buf, &f), f
}

// input is n chat requests, custom ids r0..r(n-1).
func input(n int) []byte {
	var b bytes.Buffer
	for i := range n {
		fmt.Fprintf(&b, `{"custom_id":"r%d","method":"POST","url":"/v1/chat/completions","body":{"model":"mock-model","messages":[{"role":"user","content":"question %d"}]}}`+"\n", i, i)
	}
	return b.Bytes()
}

// submit uploads data and creates a batch over it with metadata.
func (e *env) submit(data []byte, meta map[string]string) batchapi.Batch {
	e.t.Helper()
	code, f := e.upload("batch", data)
	if code != 200 {
		e.t.Fatalf("upload: %d %v", code, f)
	}
	var b batchapi.Batch
	if code := e.json("POST", "/v1/batches", map[string]any{"input_file_id": f["id"], "endpoint": "/v1/chat/completions",
		"completion_window": "24h", "metadata": meta}, &b); code != 200 {
		e.t.Fatalf("create: %d %+v", code, b)
	}
	return b
}

func (e *env) get(id string) batchapi.Batch {
	e.t.Helper()
	var b batchapi.Batch
	if code := e.json("GET", "/v1/batches/"+id, nil, &b); code != 200 {
		e.t.Fatalf("get %s: %d", id, code)
	}
	return b
}

type outLine struct {
	ID       string `json:"id"`
	CustomID string `json:"custom_id"`
	Response *struct {
		StatusCode int             `json:"status_code"`
		RequestID  string          `json:"request_id"`
		Body       json.RawMessage `json:"body"`
	} `json:"response"`
	Error any `json:"error"`
}

// lines downloads a file's content as output lines; nil id: none.
func (e *env) lines(id *string) []outLine {
	e.t.Helper()
	if id == nil {
		return nil
	}
	req, _ := http.NewRequest("GET", e.url+"/v1/files/"+*id+"/content", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		e.t.Fatal(err)
	}
	defer resp.Body.Close()
	var out []outLine
	d := json.NewDecoder(resp.Body)
	for d.More() {
		var l outLine
		if err := d.Decode(&l); err != nil {
			e.t.Fatalf("file %s: %v", *id, err)
		}
		out = append(out, l)
	}
	return out
}

func TestBatchMovesThroughItsStatesAndAnswersEveryLineOnce(t *testing.T) {
	e := newEnv(t, durations)
	b := e.submit(input(10), map[string]string{"run": "r1"})
	if b.Status != "validating" || b.Object != "batch" || b.CompletionWindow != "24h" || b.Metadata["run"] != "r1" {
		t.Fatalf("created: %+v", b)
	}
	steps := []struct {
		d         time.Duration
		status    string
		completed int
	}{
		{59 * time.Second, "validating", 0},
		{time.Second, "in_progress", 0},
		{5 * time.Minute, "in_progress", 5},
		{5 * time.Minute, "finalizing", 10},
		{time.Minute, "completed", 10},
	}
	for _, s := range steps {
		e.clock.advance(s.d)
		b = e.get(b.ID)
		if b.Status != s.status || b.RequestCounts.Completed != s.completed || b.RequestCounts.Failed != 0 {
			t.Fatalf("after %v: %s %+v, want %s with %d completed", s.d, b.Status, b.RequestCounts, s.status, s.completed)
		}
	}
	if b.RequestCounts.Total != 10 || b.InProgressAt == nil || *b.InProgressAt != b.CreatedAt+60 ||
		b.CompletedAt == nil || *b.CompletedAt != b.CreatedAt+12*60 || b.ErrorFileID != nil {
		t.Fatalf("completed: %+v", b)
	}
	seen := map[string]int{}
	for _, l := range e.lines(b.OutputFileID) {
		seen[l.CustomID]++
		var direct, body struct {
			Object  string `json:"object"`
			Choices []struct {
				Message struct{ Content string } `json:"message"`
			} `json:"choices"`
		}
		if l.Response == nil || l.Response.StatusCode != 200 || json.Unmarshal(l.Response.Body, &body) != nil ||
			body.Object != "chat.completion" || len(body.Choices) != 1 || body.Choices[0].Message.Content == "" || l.Error != nil {
			t.Fatalf("line %+v", l)
		}
		var n int
		fmt.Sscanf(l.CustomID, "r%d", &n)
		e.json("POST", "/v1/chat/completions", map[string]any{"model": "mock-model",
			"messages": []map[string]string{{"role": "user", "content": fmt.Sprint("question ", n)}}}, &direct)
		if direct.Choices[0].Message.Content != body.Choices[0].Message.Content {
			t.Fatalf("%s: the batch answered %q, /v1/chat/completions %q", l.CustomID, body.Choices[0].Message.Content, direct.Choices[0].Message.Content)
		}
	}
	for i := range 10 {
		if seen[fmt.Sprint("r", i)] != 1 {
			t.Fatalf("custom ids answered: %v", seen)
		}
	}
	if len(seen) != 10 {
		t.Fatalf("custom ids answered: %v", seen)
	}
}

func TestFailShareGoesToTheErrorFile(t *testing.T) {
	e := newEnv(t, batchapi.Options{FailShare: 0.25})
	b := e.get(e.submit(input(8), nil).ID)
	if b.Status != "completed" || b.RequestCounts != (batchapi.Counts{Total: 8, Completed: 6, Failed: 2}) {
		t.Fatalf("%+v", b)
	}
	seen := map[string]int{}
	for _, l := range e.lines(b.OutputFileID) {
		seen[l.CustomID]++
	}
	errs := e.lines(b.ErrorFileID)
	for _, l := range errs {
		seen[l.CustomID]++
		if l.Response == nil || l.Response.StatusCode != 500 || !strings.Contains(string(l.Response.Body), "server_error") {
			t.Fatalf("error line %+v", l)
		}
	}
	if len(errs) != 2 || len(seen) != 8 {
		t.Fatalf("%d error lines, ids %v", len(errs), seen)
	}
	for id, n := range seen {
		if n != 1 {
			t.Fatalf("%s in %d files", id, n)
		}
	}
}

func TestTheMocksFaultsFailLines(t *testing.T) {
	for _, o := range []mockserver.Options{{Rate500: 1}, {RateReset: 1}, {StallRate: 1}} {
		c := newClock()
		o.Batch = batchapi.Options{Clock: c.now, LineTimeout: time.Millisecond}
		ts := httptest.NewServer(mockserver.New(o))
		e := &env{t: t, clock: c, url: ts.URL}
		b := e.get(e.submit(input(3), nil).ID)
		errs := e.lines(b.ErrorFileID)
		if b.Status != "completed" || b.RequestCounts != (batchapi.Counts{Total: 3, Failed: 3}) || len(errs) != 3 || errs[0].Response.StatusCode != 500 {
			t.Errorf("%+v: %+v, %d error lines", o, b, len(errs))
		}
		ts.Close()
	}
}

func TestMalformedLineFailsValidation(t *testing.T) {
	e := newEnv(t, durations)
	data := append(input(1), []byte("{not json\n")...)
	b := e.submit(data, nil)
	e.clock.advance(time.Minute)
	b = e.get(b.ID)
	if b.Status != "failed" || b.FailedAt == nil || b.Errors == nil || len(b.Errors.Data) != 1 {
		t.Fatalf("%+v", b)
	}
	if le := b.Errors.Data[0]; le.Code != "invalid_json_line" || le.Line == nil || *le.Line != 2 {
		t.Fatalf("error %+v", le)
	}
}

func TestFailValidationFailsTheFirstBatches(t *testing.T) {
	e := newEnv(t, batchapi.Options{FailValidation: 1})
	first, second := e.get(e.submit(input(2), nil).ID), e.get(e.submit(input(2), nil).ID)
	if first.Status != "failed" || first.Errors == nil || first.Errors.Data[0].Code != "invalid_json_line" || *first.Errors.Data[0].Line != 1 || second.Status != "completed" {
		t.Fatalf("first %+v, second %+v", first, second)
	}
}

func TestTooManyRequestsFailValidation(t *testing.T) {
	e := newEnv(t, batchapi.Options{MaxRequests: 2})
	b := e.get(e.submit(input(3), nil).ID)
	if b.Status != "failed" || b.Errors == nil || len(b.Errors.Data) != 1 || b.Errors.Data[0].Code != "too_many_requests" || b.Errors.Data[0].Line != nil {
		t.Fatalf("%+v", b)
	}
}

func TestListingPagesNewestFirstWithMetadata(t *testing.T) {
	e := newEnv(t, durations)
	var ids []string
	for i := range 3 {
		ids = append(ids, e.submit(input(1), map[string]string{"n": fmt.Sprint(i)}).ID)
	}
	var l struct {
		Object  string           `json:"object"`
		Data    []batchapi.Batch `json:"data"`
		HasMore bool             `json:"has_more"`
		LastID  string           `json:"last_id"`
	}
	e.json("GET", "/v1/batches?limit=2", nil, &l)
	if l.Object != "list" || !l.HasMore || len(l.Data) != 2 || l.Data[0].ID != ids[2] || l.Data[1].Metadata["n"] != "1" || l.LastID != ids[1] {
		t.Fatalf("first page %+v", l)
	}
	e.json("GET", "/v1/batches?limit=2&after="+l.LastID, nil, &l)
	if l.HasMore || len(l.Data) != 1 || l.Data[0].ID != ids[0] || l.Data[0].Metadata["n"] != "0" {
		t.Fatalf("second page %+v", l)
	}
	if code := e.json("GET", "/v1/batches?limit=x", nil, nil); code != 400 {
		t.Fatalf("limit=x: %d", code)
	}
}

func TestCancelKeepsWhatWasAnswered(t *testing.T) {
	e := newEnv(t, durations)
	b := e.submit(input(10), nil)
	e.clock.advance(time.Minute + 3*time.Minute)
	var c batchapi.Batch
	if code := e.json("POST", "/v1/batches/"+b.ID+"/cancel", nil, &c); code != 200 || c.Status != "cancelling" || c.RequestCounts.Completed != 3 {
		t.Fatalf("cancel: %d %+v", code, c)
	}
	e.clock.advance(time.Minute)
	b = e.get(b.ID)
	if b.Status != "cancelled" || b.CancelledAt == nil || len(e.lines(b.OutputFileID)) != 3 {
		t.Fatalf("%+v", b)
	}
	if code := e.json("POST", "/v1/batches/"+b.ID+"/cancel", nil, &c); code != 200 || c.Status != "cancelled" {
		t.Fatalf("cancel again: %d %+v", code, c)
	}
	if code := e.json("POST", "/v1/batches/nope/cancel", nil, nil); code != 404 {
		t.Fatalf("cancel unknown: %d", code)
	}
}

func TestBatchExpiresAfterItsWindow(t *testing.T) {
	e := newEnv(t, batchapi.Options{InProgress: 48 * time.Hour})
	b := e.submit(input(4), nil)
	e.clock.advance(24 * time.Hour)
	b = e.get(b.ID)
	if b.Status != "expired" || b.ExpiredAt == nil || b.RequestCounts.Completed != 2 || len(e.lines(b.OutputFileID)) != 2 {
		t.Fatalf("%+v", b)
	}
}

// listBatches returns the ids the server lists.
func (e *env) listBatches() []string {
	var l struct{ Data []batchapi.Batch }
	e.json("GET", "/v1/batches?limit=100", nil, &l)
	var ids []string
	for _, b := range l.Data {
		ids = append(ids, b.ID)
	}
	return ids
}

func TestHoldCreateStopsTheAnswer(t *testing.T) {
	for _, after := range []bool{false, true} {
		t.Run(fmt.Sprint("afterStore=", after), func(t *testing.T) {
			e := newEnv(t, durations)
			_, f := e.upload("batch", input(2))
			hold := e.srv.Batches().HoldCreate(after)
			ctx, cancel := context.WithCancel(context.Background())
			done := make(chan error, 1)
			go func() {
				b, _ := json.Marshal(map[string]any{"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"})
				req, _ := http.NewRequestWithContext(ctx, "POST", e.url+"/v1/batches", bytes.NewReader(b))
				resp, err := http.DefaultClient.Do(req)
				if err == nil {
					resp.Body.Close()
				}
				done <- err
			}()
			<-hold.Reached()
			cancel() // the client dies while held
			if err := <-done; err == nil {
				t.Fatal("the held create answered")
			}
			ids := e.listBatches()
			if len(ids) != map[bool]int{false: 0, true: 1}[after] {
				t.Fatalf("batches stored: %v", ids)
			}
			hold.Release()
			e.submit(input(1), nil) // released: creates pass
			if n := e.srv.Batches().Submitted(); n["r0"] != 1+len(ids) || n["r1"] != len(ids) {
				t.Fatalf("submitted %v", n)
			}
		})
	}
}

func TestHoldContentServesPartThenTheRest(t *testing.T) {
	e := newEnv(t, batchapi.Options{})
	b := e.get(e.submit(input(5), nil).ID)
	hold := e.srv.Batches().HoldContent(10)
	resp, err := http.Get(e.url + "/v1/files/" + *b.OutputFileID + "/content")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	head := make([]byte, 10)
	if _, err := io.ReadFull(resp.Body, head); err != nil {
		t.Fatal(err)
	}
	<-hold.Reached()
	hold.Release()
	rest, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	whole := append(head, rest...)
	if int64(len(whole)) != resp.ContentLength || bytes.Count(whole, []byte("\n")) != 5 {
		t.Fatalf("%d bytes of %d: %q", len(whole), resp.ContentLength, whole)
	}
	if len(e.lines(b.OutputFileID)) != 5 { // released: later downloads are whole
		t.Fatal("a later download was held")
	}
}

func TestFilesAPI(t *testing.T) {
	e := newEnv(t, batchapi.Options{MaxFileBytes: 100})
	if code, f := e.upload("batch", []byte(strings.Repeat("x", 101))); code != 400 || !strings.Contains(fmt.Sprint(f), "larger than 100") {
		t.Fatalf("too big: %d %v", code, f)
	}
	if code, f := e.upload("nonsense", []byte("x")); code != 400 || !strings.Contains(fmt.Sprint(f), "purpose") {
		t.Fatalf("purpose: %d %v", code, f)
	}
	code, f := e.upload("batch", []byte("abc\n"))
	if code != 200 || f["object"] != "file" || f["bytes"] != 4.0 || f["purpose"] != "batch" || f["filename"] != "in.jsonl" {
		t.Fatalf("upload: %d %v", code, f)
	}
	id := f["id"].(string)
	var got map[string]any
	if code := e.json("GET", "/v1/files/"+id, nil, &got); code != 200 || got["id"] != id {
		t.Fatalf("get: %d %v", code, got)
	}
	var l struct{ Data []map[string]any }
	if e.json("GET", "/v1/files?purpose=batch", nil, &l); len(l.Data) != 1 || l.Data[0]["id"] != id {
		t.Fatalf("list: %v", l)
	}
	if code := e.json("DELETE", "/v1/files/"+id, nil, &got); code != 200 || got["deleted"] != true {
		t.Fatalf("delete: %d %v", code, got)
	}
	if code := e.json("GET", "/v1/files/"+id, nil, nil); code != 404 {
		t.Fatalf("get deleted: %d", code)
	}
}

func TestCreateRefusesBadRequests(t *testing.T) {
	e := newEnv(t, durations)
	_, f := e.upload("batch", input(1))
	_, user := e.upload("user_data", input(1))
	for _, c := range []struct {
		body  map[string]any
		code  int
		param string
	}{
		{map[string]any{"endpoint": "/v1/chat/completions", "completion_window": "24h"}, 400, "input_file_id"},
		{map[string]any{"input_file_id": "file-x", "endpoint": "/v1/chat/completions", "completion_window": "24h"}, 404, "input_file_id"},
		{map[string]any{"input_file_id": user["id"], "endpoint": "/v1/chat/completions", "completion_window": "24h"}, 400, "input_file_id"},
		{map[string]any{"input_file_id": f["id"], "endpoint": "/v1/embeddings", "completion_window": "24h"}, 400, "endpoint"},
		{map[string]any{"input_file_id": f["id"], "endpoint": "/v1/chat/completions", "completion_window": "1h"}, 400, "completion_window"},
	} {
		var er struct {
			Error struct {
				Message, Type string
				Param         *string
			}
		}
		if code := e.json("POST", "/v1/batches", c.body, &er); code != c.code || er.Error.Param == nil || *er.Error.Param != c.param || er.Error.Type != "invalid_request_error" {
			t.Errorf("%v: %d %+v", c.body, code, er)
		}
	}
}

func TestOnTheWallClockALookNeverWaitsForAnswers(t *testing.T) {
	release := make(chan struct{})
	var calls atomic.Int64
	h := batchapi.New(batchapi.Options{Parallel: 2, Answer: func(ctx context.Context, body []byte) (int, []byte) {
		calls.Add(1)
		<-release
		return 200, []byte(`{"object":"chat.completion"}`)
	}})
	mux := http.NewServeMux()
	h.Mount(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	e := &env{t: t, url: ts.URL}
	b := e.get(e.submit(input(4), nil).ID)
	if b.Status != "in_progress" || b.RequestCounts.Completed != 0 {
		t.Fatalf("with every answer held: %+v", b)
	}
	close(release)
	for b.Status == "in_progress" {
		b = e.get(b.ID)
	}
	if b.Status != "completed" || b.RequestCounts.Completed != 4 || calls.Load() != 4 || len(e.lines(b.OutputFileID)) != 4 {
		t.Fatalf("%+v after %d answers", b, calls.Load())
	}
}

// TestOnTheWallClockABatchIsAnsweredWithoutLooks: a real server answers a
// batch's lines once it is validated, whether or not a client polls; a
// client that polls every 30 s finds it done, not just started.
func TestOnTheWallClockABatchIsAnsweredWithoutLooks(t *testing.T) {
	answered := make(chan struct{}, 4)
	h := batchapi.New(batchapi.Options{Validating: time.Millisecond, Answer: func(ctx context.Context, body []byte) (int, []byte) {
		answered <- struct{}{}
		return 200, []byte(`{"object":"chat.completion"}`)
	}})
	mux := http.NewServeMux()
	h.Mount(mux)
	ts := httptest.NewServer(mux)
	defer ts.Close()
	e := &env{t: t, url: ts.URL}
	id := e.submit(input(4), nil).ID
	for range 4 {
		select {
		case <-answered:
		case <-time.After(time.Minute):
			t.Fatal("a minute after its creation, nobody looking, the batch's lines are not all answered")
		}
	}
	b := e.get(id)
	for b.Status == "in_progress" || b.Status == "finalizing" { // counted on the look
		b = e.get(id)
	}
	if b.Status != "completed" || b.RequestCounts.Completed != 4 {
		t.Fatalf("%+v", b)
	}
}

func TestFileListsNewestFirst(t *testing.T) {
	e := newEnv(t, batchapi.Options{})
	b := e.get(e.submit(input(1), nil).ID) // the input, then the output
	var l struct {
		Data    []map[string]any
		HasMore bool `json:"has_more"`
	}
	if e.json("GET", "/v1/files?limit=1", nil, &l); len(l.Data) != 1 || l.Data[0]["id"] != *b.OutputFileID || l.Data[0]["purpose"] != "batch_output" || !l.HasMore {
		t.Fatalf("first page %+v", l)
	}
	if e.json("GET", "/v1/files?after="+*b.OutputFileID, nil, &l); len(l.Data) != 1 || l.Data[0]["id"] != b.InputFileID || l.HasMore {
		t.Fatalf("after the output %+v", l)
	}
	if e.json("GET", "/v1/files?after=file-gone", nil, &l); len(l.Data) != 0 {
		t.Fatalf("after an unknown id %+v", l)
	}
}

func TestOptionsRefuseNonsense(t *testing.T) {
	for _, o := range []batchapi.Options{{Validating: -1}, {FailShare: 1.5}, {Parallel: -1}, {MaxFileBytes: -1}, {FailValidation: -1}} {
		if o.Validate() == nil {
			t.Errorf("%+v: no error", o)
		}
	}
	if err := (batchapi.Options{FailShare: 1}).Validate(); err != nil {
		t.Error(err)
	}
}
