package pool

import (
	"bytes"
	"context"
	"encoding/json"
	"math"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/shape"
	"github.com/synthgen/synthgen/generator/wire"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

const (
	verdictSchema = `{"type":"object","properties":{"score":{"type":"integer","minimum":1,"maximum":10},"reason":{"type":"string"}},"required":["score","reason"]}`
	validVerdict  = `{"score": 7, "reason": "ok"}`
	badVerdict    = `{"score": "high"}`
)

func verdictFormat() job.ResponseFormat {
	return job.ResponseFormat{Type: job.FormatJSONSchema, Name: "verdict", Schema: json.RawMessage(verdictSchema), Strict: true}
}

// shapeServer answers each prompt "prompt ID" with content not in the
// verdict's shape for the first bad[ID] attempts (all of them when bad[ID]
// < 0), then with a valid verdict; the reasoning is never JSON. It counts
// the requests each prompt got.
type shapeServer struct {
	bad  map[string]int
	mu   sync.Mutex
	seen map[string]int
}

func (s *shapeServer) Complete(_ context.Context, req wire.Request, _ func(int)) (wire.Response, error) {
	id := strings.TrimPrefix(req.Messages[len(req.Messages)-1].Content, "prompt ")
	s.mu.Lock()
	s.seen[id]++
	n := s.seen[id]
	s.mu.Unlock()
	content := validVerdict
	if k := s.bad[id]; k < 0 || n <= k {
		content = badVerdict
	}
	if id == "call" { // a tool call: no content
		return wire.Response{Model: req.Model, FinishReason: "tool_calls", PromptTokens: 5, CompletionTokens: 9, UsageKnown: true,
			ToolCalls: []chat.ToolCall{{ID: "chatcmpl-tool-1", Type: "function", Function: chat.ToolFunction{Name: "get_weather", Arguments: `{"city":"Paris"}`}}}}, nil
	}
	return wire.Response{Model: req.Model, Reasoning: "let me think {not json", Content: content, FinishReason: "stop", PromptTokens: 5, CompletionTokens: 9, UsageKnown: true}, nil
}

// TestSchemaRetries: an answer whose content is not in the job's shape is
// asked again at once, up to SchemaRetries times (counted as retries of
// cause schema), and one never in it is an error record with the
// validator's message and the answer's start; the reasoning, free text, is
// not checked, nor an answer that calls a tool.
func TestSchemaRetries(t *testing.T) {
	srv := &shapeServer{bad: map[string]int{"ok": 0, "once": 1, "twice": 2, "never": -1, "call": -1}, seen: map[string]int{}}
	stats := runstats.NewStats(nil)
	o := testOptions(2)
	o.Sampling.ResponseFormat = verdictFormat()
	o.SchemaRetries = 2
	eng, err := New(srv, stats, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	if _, err := eng.Run(context.Background(), newSliceSource("ok", "once", "twice", "never", "call"), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	recs := recordsByID(t, dir)
	for id, attempts := range map[string]int{"ok": 1, "once": 2, "twice": 3} {
		r, ok := recs[id]
		if !ok || r.Content != validVerdict || r.Attempts != attempts {
			t.Errorf("%s: record %+v, want the valid verdict in %d attempts", id, r, attempts)
		}
	}
	if _, ok := recs["never"]; ok {
		t.Error("an answer never in the shape was recorded as done")
	}
	// The shape is the final answer's: a tool call, with no content, is
	// recorded as it came, not asked again until it fails.
	if r, ok := recs["call"]; !ok || len(r.ToolCalls) != 1 || r.Attempts != 1 || srv.seen["call"] != 1 {
		t.Errorf("a tool call under a response_format: record %+v after %d requests, want the call in one", r, srv.seen["call"])
	}
	errs := readJSONL[sink.ErrorRecord](t, dir, "errors")
	if len(errs) != 1 {
		t.Fatalf("errors %+v, want one", errs)
	}
	e := errs[0]
	if e.ID != "never" || e.Cause != shape.Cause || e.Attempts != 3 ||
		!strings.Contains(e.Message, "at '/score': got string, want integer") || !strings.Contains(e.Message, "it began: "+badVerdict) {
		t.Errorf("error record %+v, want never's, cause schema, 3 attempts, the validator's message and the answer", e)
	}
	if srv.seen["never"] != 3 {
		t.Errorf("never was asked %d times, want 1 + 2 schema retries", srv.seen["never"])
	}
	snap := stats.Snapshot()
	if got := snap.RetriesByCause[shape.Cause]; got != 1+2+2 || snap.Retries != got {
		t.Errorf("retries %d, by cause %v: want 5, all schema", snap.Retries, snap.RetriesByCause)
	}
	if snap.Errors != 1 {
		t.Errorf("stats: %d errors, want 1", snap.Errors)
	}
}

// TestSchemaRetriesZero: with no retries the first answer not in the
// shape is the error.
func TestSchemaRetriesZero(t *testing.T) {
	srv := &shapeServer{bad: map[string]int{"a": 1}, seen: map[string]int{}}
	o := testOptions(1)
	o.Sampling.ResponseFormat = verdictFormat()
	eng, err := New(srv, runstats.NewStats(nil), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	if _, err := eng.Run(context.Background(), newSliceSource("a"), out); err != nil {
		t.Fatal(err)
	}
	_ = out.Close()
	if errs := readJSONL[sink.ErrorRecord](t, dir, "errors"); len(errs) != 1 || errs[0].Attempts != 1 || srv.seen["a"] != 1 {
		t.Errorf("errors %+v after %d requests, want one error after one", errs, srv.seen["a"])
	}
}

// TestSchemaNotAReplicaFault: a replica that answers every prompt out of
// shape is well (it answered); the prompt is at fault. It is never taken
// out, and keeps taking requests; every prompt ends valid, from the other.
func TestSchemaNotAReplicaFault(t *testing.T) {
	const rows = 60
	wrong := &shapeServer{bad: map[string]int{}, seen: map[string]int{}}
	right := &shapeServer{bad: map[string]int{}, seen: map[string]int{}}
	ids := make([]string, rows)
	for i := range ids {
		ids[i] = strconv.Itoa(i)
		wrong.bad[ids[i]] = -1
	}
	var log bytes.Buffer
	o := testOptions(4)
	o.Sampling.ResponseFormat = verdictFormat()
	o.SchemaRetries = 100
	o.Log = &log
	o.Endpoints = []Endpoint{{URL: "http://wrong/v1", Client: wrong}, {URL: "http://right/v1", Client: right}}
	stats := runstats.NewStats(nil)
	eng, err := New(wrong, stats, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	if _, err := eng.Run(context.Background(), newSliceSource(ids...), out); err != nil {
		t.Fatal(err)
	}
	_ = out.Close()
	if n := len(recordsByID(t, dir)); n != rows {
		t.Errorf("%d records, want %d", n, rows)
	}
	if strings.Contains(log.String(), "taken out") {
		t.Errorf("the replica answering out of shape was taken out:\n%s", log.String())
	}
	asked := 0
	for _, n := range wrong.seen {
		asked += n
	}
	// Taken out after healthMin failures, it would get a trial a second.
	if asked <= healthWindow {
		t.Errorf("the replica answering out of shape got %d requests: it was kept from them", asked)
	}
	for i, ep := range stats.Snapshot().Endpoints {
		if ep.State == runstats.EndpointDown {
			t.Errorf("endpoint %d is down: %s", i, ep.Reason)
		}
	}
}

// TestSchemaRefusedAtNew: a schema that does not compile is the engine's
// error, naming the key, before any request.
func TestSchemaRefusedAtNew(t *testing.T) {
	o := testOptions(1)
	o.Sampling.ResponseFormat = job.ResponseFormat{Type: job.FormatJSONSchema, Name: "x", Schema: json.RawMessage(`{"type":"objekt"}`)}
	if _, err := New(&shapeServer{}, nil, o); err == nil || !strings.Contains(err.Error(), "generation.response_format") {
		t.Errorf("New = %v, want an error naming generation.response_format", err)
	}
}

// cutThenRefused answers with a verdict cut at max_tokens, then refuses
// the request with more room as too long for the context.
type cutThenRefused struct{ n int }

func (c *cutThenRefused) Complete(_ context.Context, req wire.Request, _ func(int)) (wire.Response, error) {
	if c.n++; c.n > 1 {
		return wire.Response{}, &wire.Error{Status: 400, Cause: wire.CauseTooLong, Message: "too long"}
	}
	return wire.Response{Model: req.Model, Content: `{"score": 7, "rea`, FinishReason: "length", CompletionTokens: req.MaxTokens, UsageKnown: true}, nil
}

// TestSchemaCutAnswerKept: on_length: retry keeps a cut answer when more
// room cannot be had, but only one in the shape: a cut verdict is no
// verdict, and is the schema error.
func TestSchemaCutAnswerKept(t *testing.T) {
	o := testOptions(1)
	o.Sampling.ResponseFormat = verdictFormat()
	o.Sampling.OnLength = job.LengthRetry
	eng, err := New(&cutThenRefused{}, runstats.NewStats(nil), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	if _, err := eng.Run(context.Background(), newSliceSource("a"), out); err != nil {
		t.Fatal(err)
	}
	_ = out.Close()
	if recs := recordsByID(t, dir); len(recs) != 0 {
		t.Errorf("a cut verdict was recorded: %+v", recs)
	}
	errs := readJSONL[sink.ErrorRecord](t, dir, "errors")
	if len(errs) != 1 || errs[0].Cause != shape.Cause || !strings.Contains(errs[0].Message, "an answer cut at max_tokens?") {
		t.Errorf("errors %+v, want one of cause schema saying the JSON was cut", errs)
	}
}

// TestShapeCompiledOnce: a Shape the caller compiled is the one used; the
// schema is not compiled again (here it could not be: New would fail).
func TestShapeCompiledOnce(t *testing.T) {
	v, err := shape.Compile(job.ResponseFormat{Type: job.FormatJSONObject})
	if err != nil {
		t.Fatal(err)
	}
	opts := testOptions(1)
	opts.Sampling.ResponseFormat = job.ResponseFormat{Type: job.FormatJSONSchema, Schema: []byte(`not json`)}
	opts.Shape = v
	eng, err := New(&idTalker{}, nil, opts)
	if err != nil {
		t.Fatalf("New compiled the schema again: %v", err)
	}
	if eng.shape != v {
		t.Error("the engine checks answers with another validator than the one given")
	}
}

// TestSchemaFailureKeepsItsSample: with n > 1, each sample never in the
// shape is its own error record, under its own sample, so that a resume
// finds every one failed rather than sample 0 three times.
func TestSchemaFailureKeepsItsSample(t *testing.T) {
	srv := &shapeServer{bad: map[string]int{"never": -1}, seen: map[string]int{}}
	o := testOptions(3)
	o.Sampling.ResponseFormat = verdictFormat()
	o.Sampling.Samples = 3
	eng, err := New(srv, runstats.NewStats(nil), o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	if _, err := eng.Run(context.Background(), newSliceSource("never"), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	samples := map[int]bool{}
	for _, e := range readJSONL[sink.ErrorRecord](t, dir, "errors") {
		if e.ID != "never" || e.Cause != shape.Cause {
			t.Errorf("error record %+v, want never's, cause schema", e)
		}
		samples[e.Sample] = true
	}
	if len(samples) != 3 || !samples[0] || !samples[1] || !samples[2] {
		t.Errorf("error records of samples %v, want 0, 1 and 2", samples)
	}
}

// TestRefusedAnswersAreBilled: every answer the server sent counts at its
// usage in the billed figure, those refused for their shape and those of a
// key that failed too, while the cost stays the kept answers' own: the
// records' sum. The figures are the server's usage times the price, so
// they must match exactly what a provider bills for them.
func TestRefusedAnswersAreBilled(t *testing.T) {
	srv := &shapeServer{bad: map[string]int{"ok": 0, "once": 1, "never": -1}, seen: map[string]int{}}
	stats := runstats.NewStats(nil)
	price := runstats.Price{Input: 2, Output: 10, CachedInput: 1}
	stats.SetPrice(price)
	o := testOptions(1)
	o.Sampling.ResponseFormat = verdictFormat()
	o.SchemaRetries = 2
	o.Price = &price
	eng, err := New(srv, stats, o)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	out := openSink(t, dir)
	if _, err := eng.Run(context.Background(), newSliceSource("ok", "once", "never"), out); err != nil {
		t.Fatal(err)
	}
	if err := out.Close(); err != nil {
		t.Fatal(err)
	}
	one := price.Cost(5, 0, 9) // every answer of shapeServer
	answers := srv.seen["ok"] + srv.seen["once"] + srv.seen["never"]
	if answers != 1+2+3 {
		t.Fatalf("%d answers sent, want 6", answers)
	}
	var kept float64
	for _, r := range recordsByID(t, dir) {
		kept += r.Cost
	}
	snap := stats.Snapshot()
	if want := 2 * one; math.Abs(kept-want) > 1e-12 || math.Abs(snap.Cost-want) > 1e-12 {
		t.Errorf("kept cost %v, records' %v, want two answers' %v", snap.Cost, kept, want)
	}
	if want := float64(answers) * one; math.Abs(snap.Billed-want) > 1e-12 {
		t.Errorf("billed %v, want %d answers' %v", snap.Billed, answers, want)
	}
	rec := runstats.NewProgressRecord(snap, nil)
	if rec.CostBilled == nil || *rec.CostBilled != snap.Billed {
		t.Errorf("status.json's cost_billed %v, want %v", rec.CostBilled, snap.Billed)
	}
}
