package view

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
	"github.com/synthgen/synthgen/generator/autoconc"
	"github.com/synthgen/synthgen/generator/runstats"
	"github.com/synthgen/synthgen/generator/runstats/runfiles"
	"github.com/synthgen/synthgen/job"
	"github.com/synthgen/synthgen/sink"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// The hostile record: every field a page shows is markup and script.
const (
	hostileContent = `<script>alert(1)</script><img src=x onerror=alert(2)>`
	hostileID      = `"><svg onload=alert(7)>`
)

// fixture is an output directory written by the sink, with what a test
// checks it against.
type fixture struct {
	dir       string
	records   []sink.Record // as written, in order
	failed    []sink.Key    // failed for good: an error record, no record
	answered  []sink.Key    // an error record, then a record
	maxTokens int
}

// fixtureJob is the job the fixtures' manifests record.
func fixtureJob(t testing.TB) sink.JobRecord {
	j := job.Job{
		Selection: dataset.Selection{Path: "prompts.jsonl", Format: "messages"},
		Sampling:  job.Sampling{Model: "mock-model", MaxTokens: 2048, Temperature: 0.6, TopP: 0.95, Samples: 1},
	}
	rec, err := j.ManifestEntry("test", map[string]any{
		"concurrency": 64, "generation": map[string]any{"max_tokens": 2048, "temperature": 0.6},
		"endpoint": map[string]any{"base_url": "http://127.0.0.1:8000/v1", "model": "mock-model"},
	})
	if err != nil {
		t.Fatal(err)
	}
	return rec
}

// fixtureRecord is record i: every fifth cut at max_tokens, every seventh
// without reasoning, every eleventh with think tags in content, every
// ninth a whole conversation; record 2 is the hostile one.
func fixtureRecord(i int) sink.Record {
	r := sink.Record{
		ID:     strconv.Itoa(i),
		Source: []string{"math", "code", "chat"}[i%3],
		Messages: []chat.Message{
			{Role: "system", Content: "be brief"},
			{Role: "user", Content: fmt.Sprintf("question %d: explain %s", i, strings.Repeat("why ", i%5+1))},
		},
		Reasoning:        fmt.Sprintf("thinking about %d: %s", i, strings.Repeat("hmm. ", 3+i%17)),
		Content:          fmt.Sprintf("the answer to %d is %s", i, strings.Repeat("long ", 1+i%23)),
		FinishReason:     "stop",
		Model:            "mock-model",
		PromptTokens:     20 + i%40,
		CompletionTokens: 100 + i*37%1800,
		LatencyMS:        500 + float64(i*97%9000),
		TTFTMS:           20 + float64(i*13%300),
		Attempts:         1,
		CreatedAt:        time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second),
	}
	if i%5 == 0 {
		r.FinishReason, r.CompletionTokens = "length", 2048
	}
	if i%7 == 3 {
		r.Reasoning = ""
	}
	if i%11 == 5 {
		r.Content = "<think>the thought left in content</think> " + r.Content
	}
	if i%9 == 4 {
		r.Turns = []sink.Turn{
			{Reasoning: "first thought", Content: "first answer", FinishReason: "stop", PromptTokens: 10, CompletionTokens: 50},
			{Reasoning: r.Reasoning, Content: r.Content, FinishReason: r.FinishReason, PromptTokens: r.PromptTokens, CompletionTokens: r.CompletionTokens - 50},
		}
	}
	if i == 2 {
		r.ID = hostileID
		r.Content = hostileContent
		r.Reasoning = `<img src=x onerror=alert(3)>`
		r.Source = `"><script>alert(5)</script>`
		r.Messages[1].Content = `</pre><script>alert(4)</script>`
		r.FinishReason = `<b onmouseover=alert(6)>stop</b>`
	}
	return r
}

// writeFixture writes n records in parts of partSize in format, three keys
// that fail for good and two that fail before their record, and closes the
// sink; open leaves it open (a live run) and returns it.
func writeFixture(t testing.TB, dir, format string, n, partSize int, open bool) (*fixture, *sink.Sink) {
	t.Helper()
	s, err := sink.Open(sink.Options{Dir: dir, Format: format, PartSize: partSize, Job: fixtureJob(t), SyncInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{dir: dir, maxTokens: 2048}
	fail := func(k sink.Key, cause string) {
		if err := s.WriteError(&sink.ErrorRecord{ID: k.ID, Sample: k.Sample, Status: 500, Message: "<b>server said</b> no",
			Attempts: 6, Cause: cause, CreatedAt: time.Date(2025, 6, 1, 11, 0, 0, 0, time.UTC)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, i := range []int{1, 6} {
		k := sink.Key{ID: strconv.Itoa(i)}
		fail(k, "timeout")
		f.answered = append(f.answered, k)
	}
	for i := range n {
		r := fixtureRecord(i)
		if err := s.Write(&r); err != nil {
			t.Fatal(err)
		}
		f.records = append(f.records, r)
	}
	for i := n; i < n+3; i++ {
		k := sink.Key{ID: strconv.Itoa(i)}
		fail(k, []string{"http_400", "stream_cut", "http_400"}[i-n])
		f.failed = append(f.failed, k)
	}
	if err := s.Flush(); err != nil {
		t.Fatal(err)
	}
	if open {
		return f, s
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f, nil
}

// writeHistory appends a history of two runs to dir: run 1 ramps up from
// nothing in flight to 64 under concurrency: auto (two moves), loses the
// server for three heartbeats and is interrupted; run 2 resumes with the
// keys run 1 did. It returns the lines.
func writeHistory(t testing.TB, dir string, run1, run2 int) []runfiles.HistoryRecord {
	t.Helper()
	h := runfiles.NewHistory(dir)
	t0 := time.Date(2025, 6, 1, 12, 0, 0, 0, time.UTC)
	var out []runfiles.HistoryRecord
	add := func(run, i int, r runfiles.HistoryRecord) {
		// Run 2 resumes a minute after run 1's last point: both spans
		// wide enough on a plot for their labels.
		started := t0.Add(time.Duration(run) * (time.Duration(run1)*10*time.Second + time.Minute))
		r.Event, r.StartedAt, r.PID, r.Hostname = "status", started, 100+run, "gpu-07"
		r.Time = started.Add(time.Duration(i) * 10 * time.Second)
		r.Concurrency = 64
		if err := h.Append(r); err != nil {
			t.Fatal(err)
		}
		out = append(out, r)
	}
	kv := func(v float64) *float64 { return &v }
	done := int64(0)
	for i := range run1 {
		var r runfiles.HistoryRecord
		r.State = runfiles.StateRunning
		if i == run1-1 {
			r.State = runfiles.StateInterrupted
		}
		inFlight := min(int64(i*8), 64)
		r.InFlight = inFlight
		done += int64(i / 2)
		r.Done, r.Total = done, 10000
		r.TokPerS10s, r.TokPerS, r.ReqPerS10s, r.ReqPerS = float64(i*100), float64(i*80), float64(i)/10, float64(i)/12
		r.Server = &runstats.ServerRecord{GenTokPerS: float64(i * 105), Running: float64(inFlight), Waiting: float64(i % 4), KVCacheUsage: kv(float64(i%10) / 10)}
		if i%2 == 0 {
			r.Server.PrefixCacheHitRate = kv(0.25) // a server that reports a prefix cache, every other scrape
		}
		r.ErrorsByCause = map[string]int64{"timeout": int64(i / 10)}
		r.RetriesByCause = map[string]int64{"connection": int64(i / 5)}
		r.Errors, r.Retries = int64(i/10), int64(i/5)
		r.ConcurrencyAuto = &autoconc.Record{Limit: 32, Ceiling: 64, Reason: "start"}
		if i >= 5 {
			r.ConcurrencyAuto = &autoconc.Record{Limit: 48, Ceiling: 64, Reason: "kv 40%: room", Moves: 1, MovedAt: t0.Add(50 * time.Second)}
		}
		if i >= 9 {
			r.ConcurrencyAuto = &autoconc.Record{Limit: 64, Ceiling: 64, Reason: "kv 60%: room", Moves: 2, MovedAt: t0.Add(90 * time.Second)}
		}
		if i >= 12 && i < 15 {
			down := t0.Add(115 * time.Second)
			r.ServerDownSince = &down
			r.Server = nil
		}
		add(0, i, r)
	}
	for i := range run2 {
		var r runfiles.HistoryRecord
		r.State = runfiles.StateRunning
		if i == run2-1 {
			r.State = runfiles.StateDone
		}
		r.AlreadyDone = done
		r.InFlight = min(int64(i*16), 64)
		r.Done, r.Total = done+int64(i*3), 10000
		r.TokPerS10s = float64(i * 150)
		// Run 2 is paced to a hosted endpoint's limits and answers three
		// turns a key: some keys wait for their share, and the servers
		// take three requests a key.
		r.Paced = min(int64(i*4), 30)
		r.ReqPerS = float64(i) / 10
		requests := 3 * r.ReqPerS
		r.RequestsPerS = &requests
		r.Endpoints = []runstats.EndpointRecord{{URL: "http://a:8000/v1", TokPerS10s: float64(i * 100)}, {URL: "http://b:8000/v1", TokPerS10s: float64(i * 50)}}
		add(1, i, r)
	}
	return out
}

// dirNames lists a directory's entries (a test that must not change it).
func dirState(t testing.TB, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	for _, sub := range []string{"", "data", "errors"} {
		entries, err := os.ReadDir(dir + "/" + sub)
		if err != nil {
			continue
		}
		for _, e := range entries {
			st, err := e.Info()
			if err != nil {
				t.Fatal(err)
			}
			out[sub+"/"+e.Name()] = fmt.Sprint(st.Size(), st.ModTime().UnixNano())
		}
	}
	return out
}
