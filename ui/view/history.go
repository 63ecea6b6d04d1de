package view

// A directory's history.jsonl (runfiles.History) as the series the run
// page plots: one value per line for each figure, and the marks on the
// time axis (where each run starts and ends, the server's outages,
// concurrency: auto's moves).

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"time"

	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/sink"
)

// num is one value of a series; NaN (no value at that point: the server
// said nothing) is JSON null.
type num float64

// MarshalJSON writes NaN and infinities as null.
func (n num) MarshalJSON() ([]byte, error) {
	f := float64(n)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return []byte("null"), nil
	}
	return strconv.AppendFloat(nil, f, 'g', -1, 64), nil
}

var none = num(math.NaN())

// Series are a directory's figures over time.
type Series struct {
	Dir     string `json:"dir"`
	Points  int    `json:"points"`
	Skipped int    `json:"skipped,omitempty"` // lines that did not decode
	Note    string `json:"note,omitempty"`
	// T is each point's time, Unix seconds.
	T []float64 `json:"t"`
	// Lines are the figures by their name in status.json: tok_per_s_10s,
	// tok_per_s, server_gen_tok_per_s, req_per_s_10s, req_per_s (keys),
	// requests_per_s (every turn's; null with one a key), in_flight
	// (keys holding a slot), paced (of them, those waiting for a rate
	// limit's share), limit, server_running, server_waiting, no_byte_yet,
	// kv_cache_usage (percent), preemptions, done, errors, retries.
	Lines map[string][]num `json:"lines"`
	// ErrorsByCause and RetriesByCause are each cause's count so far in
	// its run (they start again with each run).
	ErrorsByCause  map[string][]num `json:"errors_by_cause"`
	RetriesByCause map[string][]num `json:"retries_by_cause"`
	// Endpoints are each endpoint's tok/s and share of the run's, with
	// several.
	Endpoints []EndpointSeries `json:"endpoints,omitempty"`
	Runs      []RunMark        `json:"runs"`
	Outages   []Outage         `json:"outages"`
	Moves     []Move           `json:"moves"`
}

// EndpointSeries is one endpoint's tok/s (last 10 s) and its share of the
// endpoints' sum, in percent.
type EndpointSeries struct {
	URL   string `json:"url"`
	Tok   []num  `json:"tok_per_s_10s"`
	Share []num  `json:"share"`
}

// RunMark is one run on the time axis: its first and last point.
type RunMark struct {
	Run         int       `json:"run"` // 1: the first run in the history
	StartedAt   time.Time `json:"started_at"`
	From        float64   `json:"from"`
	To          float64   `json:"to"`
	AlreadyDone int64     `json:"already_done"` // keys done before it: a resume's
	State       string    `json:"state"`        // at its last point
	Points      int       `json:"points"`
}

// Outage is a stretch during which the server refused connections.
type Outage struct {
	From float64 `json:"from"`
	To   float64 `json:"to"`
}

// Move is a move of concurrency: auto's limit.
type Move struct {
	T      float64 `json:"t"`
	Limit  int     `json:"limit"`
	Reason string  `json:"reason"`
}

// lineNames are the fixed series, in the order the page lists them.
var lineNames = []string{"tok_per_s_10s", "tok_per_s", "server_gen_tok_per_s", "req_per_s_10s", "req_per_s",
	"requests_per_s", "in_flight", "paced", "limit", "server_running", "server_waiting", "no_byte_yet", "kv_cache_usage", "prefix_cache_hit_rate", "preemptions",
	"done",
	"errors", "retries"}

func unixSec(t time.Time) float64 { return float64(t.UnixNano()) / 1e9 }

// ReadHistory reads dir's history.jsonl as Series. A directory without one
// (written before it, or not yet run) has no points and a note saying so.
func ReadHistory(dir string) (*Series, error) {
	s := &Series{Dir: dir, Lines: map[string][]num{}, ErrorsByCause: map[string][]num{}, RetriesByCause: map[string][]num{},
		Runs: []RunMark{}, Outages: []Outage{}, Moves: []Move{}}
	for _, n := range lineNames {
		s.Lines[n] = []num{}
	}
	path := filepath.Join(dir, runfiles.HistoryFile)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		s.Note = "no " + runfiles.HistoryFile + ": the directory was written by a synthgen without it, or no run has started"
		return s, nil
	}
	if err != nil {
		return nil, fmt.Errorf("view: %w", err)
	}
	defer f.Close()
	var recs []runfiles.HistoryRecord
	_, err = sink.ForEachLine(f, func(line []byte, _ int) error {
		var r runfiles.HistoryRecord
		if json.Unmarshal(line, &r) != nil || r.Time.IsZero() {
			s.Skipped++
			return nil
		}
		recs = append(recs, r)
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("view: %s: %w", path, err)
	}
	s.fill(recs)
	return s, nil
}

// fill makes the series of recs, in the order written: each point's
// figures (point), and the marks on the time axis (mark).
func (s *Series) fill(recs []runfiles.HistoryRecord) {
	n := len(recs)
	s.Points = n
	s.T = make([]float64, n)
	for _, name := range lineNames {
		s.Lines[name] = make([]num, n)
	}
	s.ErrorsByCause = causes(recs, func(r *runfiles.HistoryRecord) map[string]int64 { return r.ErrorsByCause })
	s.RetriesByCause = causes(recs, func(r *runfiles.HistoryRecord) map[string]int64 { return r.RetriesByCause })
	s.Endpoints = endpointSeries(recs)
	down := -1 // the outage going on: an index into s.Outages
	for i := range recs {
		s.T[i] = unixSec(recs[i].Time)
		s.point(i, &recs[i])
		down = s.mark(recs, i, down)
	}
}

// causes is each cause's count at each point, 0 where it had none yet.
func causes(recs []runfiles.HistoryRecord, get func(r *runfiles.HistoryRecord) map[string]int64) map[string][]num {
	m := map[string][]num{}
	for i := range recs {
		for c := range get(&recs[i]) {
			if _, ok := m[c]; !ok {
				m[c] = make([]num, len(recs))
			}
		}
	}
	for c, vals := range m {
		for i := range recs {
			vals[i] = num(get(&recs[i])[c])
		}
	}
	return m
}

// endpointSeries are the endpoints the history names, in the order they
// first appear, each with its tok/s and share at each point.
func endpointSeries(recs []runfiles.HistoryRecord) []EndpointSeries {
	var out []EndpointSeries
	for i := range recs {
		for _, e := range recs[i].Endpoints {
			if !slices.ContainsFunc(out, func(s EndpointSeries) bool { return s.URL == e.URL }) {
				out = append(out, EndpointSeries{URL: e.URL, Tok: make([]num, len(recs)), Share: make([]num, len(recs))})
			}
		}
	}
	for i := range recs {
		var sum float64
		for _, e := range recs[i].Endpoints {
			sum += e.TokPerS10s
		}
		for k := range out {
			out[k].Tok[i], out[k].Share[i] = none, none
			for _, e := range recs[i].Endpoints {
				if e.URL == out[k].URL {
					out[k].Tok[i] = num(e.TokPerS10s)
					if sum > 0 {
						out[k].Share[i] = num(100 * e.TokPerS10s / sum)
					}
				}
			}
		}
	}
	return out
}

// point sets the lines' values at point i from r.
func (s *Series) point(i int, r *runfiles.HistoryRecord) {
	set := func(name string, v num) { s.Lines[name][i] = v }
	set("tok_per_s_10s", num(r.TokPerS10s))
	set("tok_per_s", num(r.TokPerS))
	set("req_per_s_10s", num(r.ReqPerS10s))
	set("req_per_s", num(r.ReqPerS))
	requests := none // shown only where it differs from req/s: several turns a key
	if r.RequestsPerS != nil {
		requests = num(*r.RequestsPerS)
	}
	set("requests_per_s", requests)
	set("in_flight", num(r.InFlight))
	set("paced", num(r.Paced))
	set("no_byte_yet", num(r.NoByteYet))
	set("done", num(r.Done))
	set("errors", num(r.Errors))
	set("retries", num(r.Retries))
	limit := none
	if r.Concurrency > 0 {
		limit = num(r.Concurrency)
	}
	if r.ConcurrencyAuto != nil {
		limit = num(r.ConcurrencyAuto.Limit)
	}
	set("limit", limit)
	gen, running, waiting, kv, pre, hits := none, none, none, none, none, none
	if sv := r.Server; sv != nil {
		gen, running, waiting = num(sv.GenTokPerS), num(sv.Running), num(sv.Waiting)
		if sv.KVCacheUsage != nil {
			kv = num(*sv.KVCacheUsage * 100)
		}
		if sv.PrefixCacheHitRate != nil {
			hits = num(*sv.PrefixCacheHitRate * 100)
		}
		if sv.Preemptions != nil {
			pre = num(*sv.Preemptions)
		}
	}
	set("server_gen_tok_per_s", gen)
	set("server_running", running)
	set("server_waiting", waiting)
	set("kv_cache_usage", kv)
	set("prefix_cache_hit_rate", hits)
	set("preemptions", pre)
}

// mark extends the runs, the outages and the moves with point i; down is
// the outage going on (an index into s.Outages, -1: none), returned as it
// stands after the point.
func (s *Series) mark(recs []runfiles.HistoryRecord, i, down int) int {
	r := &recs[i]
	// Runs: a new started_at is a new run.
	if k := len(s.Runs); k == 0 || !s.Runs[k-1].StartedAt.Equal(r.StartedAt) {
		s.Runs = append(s.Runs, RunMark{Run: k + 1, StartedAt: r.StartedAt, From: s.T[i], AlreadyDone: r.AlreadyDone})
		down = -1 // an outage does not span runs
	}
	run := &s.Runs[len(s.Runs)-1]
	run.To, run.State = s.T[i], string(r.State)
	run.Points++

	// Outages: server_down_since set, until a point without it.
	switch {
	case r.ServerDownSince != nil && (down < 0 || !sameTime(s.Outages[down].From, *r.ServerDownSince)):
		s.Outages = append(s.Outages, Outage{From: unixSec(*r.ServerDownSince), To: s.T[i]})
		down = len(s.Outages) - 1
	case r.ServerDownSince != nil:
		s.Outages[down].To = s.T[i]
	case down >= 0:
		s.Outages[down].To = s.T[i]
		down = -1
	}

	// Moves of concurrency: auto's limit, by its count of moves.
	if a := r.ConcurrencyAuto; a != nil && a.Moves > 0 {
		prev := 0
		if i > 0 && recs[i-1].ConcurrencyAuto != nil && recs[i-1].StartedAt.Equal(r.StartedAt) {
			prev = recs[i-1].ConcurrencyAuto.Moves
		}
		if a.Moves != prev {
			t := s.T[i]
			if !a.MovedAt.IsZero() {
				t = unixSec(a.MovedAt)
			}
			s.Moves = append(s.Moves, Move{T: t, Limit: a.Limit, Reason: a.Reason})
		}
	}
	return down
}

func sameTime(t float64, u time.Time) bool { return math.Abs(t-unixSec(u)) < 1e-6 }
