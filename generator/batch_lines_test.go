package generator

// A batch's output file as a hostile server writes it: malformed lines
// among the good ones, and a custom_id answered in both files.

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/generator/batch"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/mockserver/batchapi"
)

// corrupting serves m, but rewrites every file content it sends with
// edit.
func corrupting(t *testing.T, m *mockserver.Server, edit func(body []byte) []byte) *httptest.Server {
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || !strings.HasSuffix(r.URL.Path, "/content") {
			m.ServeHTTP(w, r)
			return
		}
		rec := httptest.NewRecorder()
		m.ServeHTTP(rec, r)
		body := rec.Body.Bytes()
		if rec.Code == http.StatusOK {
			body = edit(body)
		}
		w.WriteHeader(rec.Code)
		_, _ = w.Write(body)
	}))
	t.Cleanup(ts.Close)
	return ts
}

// TestBatchMalformedLinesCostThoseLinesOnly: two malformed lines in each
// output file (the second line cut short, a line of garbage after the
// fifth) cost nothing of the 30 rows answered: each is a record, the bad
// lines are named by file and line, and the files stay for a look.
func TestBatchMalformedLinesCostThoseLinesOnly(t *testing.T) {
	t.Parallel()
	m := mockserver.New(mockserver.Options{Seed: 1})
	ts := corrupting(t, m, func(body []byte) []byte {
		lines := bytes.SplitAfter(body, []byte("\n"))
		if len(lines) < 6 || !bytes.Contains(body, []byte(`"status_code":200`)) {
			return body
		}
		var out []byte
		for i, l := range lines {
			out = append(out, l...)
			switch i {
			case 1:
				out = append(out, l[:len(l)/2]...) // line 3: line 2 again, cut short
				out = append(out, '\n')
			case 4:
				out = append(out, "<html>502 Bad Gateway</html>\n"...) // line 7
			}
		}
		return out
	})
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 30)
	log := &lineWaiter{want: "\x00", seen: make(chan struct{})}
	s.Log = log
	res := runBatch(t, context.Background(), s)
	if res.Outcome != OutcomeDone {
		t.Fatalf("outcome %s, want done:\n%s", res.Outcome, log)
	}
	checkOnce(t, m, s.Dir, 30)
	named := regexp.MustCompile(`batch \d+: \S+\.jsonl:(3|7): malformed line`).FindAllString(log.String(), -1)
	if len(named) != 6 {
		t.Errorf("%d bad lines named (%q), want 2 in each of 3 files:\n%s", len(named), named, log)
	}
	kept, _ := filepath.Glob(filepath.Join(s.Dir, "batches", "*"))
	if len(kept) == 0 {
		t.Errorf("no batch files kept for a look at their malformed lines:\n%s", log)
	}
}

// TestBatchAnswerOverItsFailure: a custom_id whose failure comes before
// its answer (a 500 line ahead of it in the output file, and the same id
// in the error file) keeps the answer.
func TestBatchAnswerOverItsFailure(t *testing.T) {
	t.Parallel()
	m := mockserver.New(mockserver.Options{Seed: 1, Batch: batchapi.Options{FailShare: 0.3}})
	cid := regexp.MustCompile(`"custom_id":"[^"]+"`)
	ts := corrupting(t, m, func(body []byte) []byte {
		if !bytes.Contains(body, []byte(`"status_code":200`)) {
			return body
		}
		// Every answered custom_id first fails in this file, too.
		var fails []byte
		for _, id := range cid.FindAll(body, -1) {
			fails = append(fails, `{"id":"x",`...)
			fails = append(fails, id...)
			fails = append(fails, `,"response":{"status_code":500,"body":{"error":{"message":"boom"}}}}`+"\n"...)
		}
		return append(fails, body...)
	})
	dir := t.TempDir()
	s := batchSetup(t, ts.URL, dir, 20)
	res := runBatch(t, context.Background(), s)
	if res.Outcome != OutcomeIncomplete {
		t.Fatalf("outcome %s, want incomplete (the error file's rows)", res.Outcome)
	}
	ok, failed := len(recordCount(t, s.Dir)), s.Stats.Snapshot().Errors
	if ok != 14 || failed != 6 {
		t.Errorf("%d answered records and %d errors, want 14 and 6 (the mock's FailShare 0.3 of 20)", ok, failed)
	}
}

// TestBatchInputNeverOverMaxBytes: batch.max_bytes bounds an input file to
// the byte: with room for two lines and three bytes short of a third, each
// batch holds two (the size of a line once guessed 3 bytes short let a
// third in, over the bound).
func TestBatchInputNeverOverMaxBytes(t *testing.T) {
	t.Parallel()
	_, ts := newMock(t)
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "probe"), 0o755); err != nil {
		t.Fatal(err)
	}
	s := batchSetup(t, ts.URL, filepath.Join(dir, "probe"), 1)
	runBatch(t, context.Background(), s)
	es, err := batch.ReadLedger(s.Dir)
	if err != nil || len(es) != 1 {
		t.Fatalf("probe: ledger %+v (%v)", es, err)
	}
	line := es[0].Bytes // every row's line is as long: q0 ... q9
	s = batchSetup(t, ts.URL, dir, 10)
	s.Batch.MaxBytes = 3*line - 2
	if res := runBatch(t, context.Background(), s); res.Outcome != OutcomeDone {
		t.Fatalf("outcome %s, want done", res.Outcome)
	}
	if es, err = batch.ReadLedger(s.Dir); err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.Bytes > s.Batch.MaxBytes || e.Requests > 2 {
			t.Errorf("batch %d: %d requests, %d bytes, over batch.max_bytes %d (a line is %d)", e.Number, e.Requests, e.Bytes, s.Batch.MaxBytes, line)
		}
	}
	if len(es) != 5 {
		t.Errorf("%d batches of 10 lines, want 5 of two", len(es))
	}
}
