package sink

import (
	"bytes"
	"encoding/json"
	"io"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

// referenceLine is what json.Encoder, as appendFile set it up before
// appendRecord, writes for v.
func referenceLine(t testing.TB, v any) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(v)
	return buf.Bytes(), err
}

func checkAppendRecord(t testing.TB, r *Record) {
	t.Helper()
	want, werr := referenceLine(t, r)
	got, ok := appendRecord(nil, r)
	if !ok {
		if werr == nil {
			t.Fatalf("appendRecord declined a record encoding/json writes: %s", want)
		}
		return
	}
	if werr != nil {
		t.Fatalf("appendRecord wrote %s where encoding/json fails: %v", got, werr)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("appendRecord:\n%s\nencoding/json:\n%s", got, want)
	}
}

// nasty are strings at every edge of encoding/json's escaping.
var nasty = []string{
	"", "plain", `"quoted" and \back\slashed`, "<b>&amp;</b>", "tab\tnew\nline\rcr",
	"\b\f\x00\x01\x1f\x7f", "\u2028\u2029", "é 中文 🙂", "bad \xff utf-8 \xc3", "\xed\xa0\x80 surrogate",
	"</think> after <think>", "\u00a0\ufeff",
}

var floats = []float64{0, 1, -1, 0.5, 12.345, 1e-6, 9.99e-7, 1e-7, 1.5e-10, 1e20, 1e21, 1.2345e25, -3e-9,
	math.MaxFloat64, math.SmallestNonzeroFloat64, 123456789.123, 1e-300}

func TestAppendRecordMatchesEncodingJSON(t *testing.T) {
	base := Record{ID: "row-1", Sample: 2, Source: "data.jsonl:3", Reasoning: "think", Content: "answer",
		FinishReason: "stop", Model: "m", PromptTokens: 10, CompletionTokens: 20, LatencyMS: 1.5, TTFTMS: 0.25,
		Attempts: 1, CreatedAt: time.Date(2026, 11, 30, 15, 4, 5, 123456789, time.UTC),
		Messages: []Message{{Role: "user", Content: "hi"}}}
	checkAppendRecord(t, &base)
	for _, s := range nasty {
		r := base
		r.ID, r.Source, r.Reasoning, r.Content, r.FinishReason, r.Model = s, s, s, s, s, s
		r.Messages = []Message{{Role: s, Content: s}, {Role: "assistant", Content: s}}
		r.Turns = []Turn{{Reasoning: s, Content: s, FinishReason: s, PromptTokens: 1, CompletionTokens: 2}, {}}
		checkAppendRecord(t, &r)
	}
	for _, f := range floats {
		for _, sign := range []float64{1, -1} {
			r := base
			r.LatencyMS, r.TTFTMS = sign*f, f/3
			checkAppendRecord(t, &r)
		}
	}
	for _, m := range [][]Message{nil, {}} {
		r := base
		r.Messages = m
		r.Turns = []Turn{}
		checkAppendRecord(t, &r)
	}
	for _, n := range []int{0, -1, math.MaxInt64, math.MinInt64} {
		r := base
		r.Sample, r.PromptTokens, r.CompletionTokens, r.Attempts = n, n, n, n
		checkAppendRecord(t, &r)
	}
	for _, at := range []time.Time{
		{},
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.FixedZone("", 5*3600+30*60)),
		time.Date(2026, 1, 2, 3, 4, 5, 100, time.FixedZone("", -8*3600)),
		time.Date(2026, 1, 2, 3, 4, 5, 0, time.Local),
		time.Now(),
	} {
		r := base
		r.CreatedAt = at
		checkAppendRecord(t, &r)
	}
	// What encoding/json refuses, appendRecord leaves to it.
	for _, mod := range []func(*Record){
		func(r *Record) { r.LatencyMS = math.NaN() },
		func(r *Record) { r.TTFTMS = math.Inf(1) },
		func(r *Record) { r.CreatedAt = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(r *Record) { r.CreatedAt = time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC) },
		func(r *Record) { r.CreatedAt = time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600)) },
	} {
		r := base
		mod(&r)
		if _, ok := appendRecord(nil, &r); ok {
			t.Errorf("appendRecord wrote %+v, which encoding/json refuses", r)
		}
		checkAppendRecord(t, &r)
	}
}

// Random records, strings of random bytes included, against encoding/json.
func TestAppendRecordRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	nastyBytes := strings.Join(nasty, "")
	str := func() string {
		b := make([]byte, rng.IntN(12))
		for i := range b {
			if rng.IntN(3) == 0 {
				b[i] = byte(rng.IntN(256))
			} else {
				b[i] = nastyBytes[rng.IntN(len(nastyBytes))]
			}
		}
		if rng.IntN(4) == 0 {
			return string(b) + nasty[rng.IntN(len(nasty))]
		}
		return string(b)
	}
	for range 5000 {
		r := Record{ID: str(), Sample: rng.IntN(10), Source: str(), Reasoning: str(), Content: str(),
			FinishReason: str(), Model: str(), PromptTokens: rng.Int(), CompletionTokens: rng.IntN(1000),
			LatencyMS: rng.ExpFloat64() * math.Pow(10, float64(rng.IntN(40)-20)), TTFTMS: rng.Float64(),
			Attempts: rng.IntN(5), CreatedAt: time.Unix(rng.Int64N(1<<34), rng.Int64N(1e9))}
		for range rng.IntN(3) {
			r.Messages = append(r.Messages, Message{Role: str(), Content: str()})
		}
		for range rng.IntN(3) {
			r.Turns = append(r.Turns, Turn{Reasoning: str(), Content: str(), FinishReason: str(), CompletionTokens: rng.IntN(9)})
		}
		checkAppendRecord(t, &r)
	}
}

func FuzzAppendRecord(f *testing.F) {
	for _, s := range nasty {
		f.Add(s, s, 1.5, int64(0))
	}
	f.Add("x", "y", 1e-7, int64(1e18))
	f.Fuzz(func(t *testing.T, id, content string, latency float64, unixNano int64) {
		r := Record{ID: id, Content: content, Reasoning: content, LatencyMS: latency, TTFTMS: -latency,
			CreatedAt: time.Unix(0, unixNano).UTC(), Messages: []Message{{Role: "user", Content: id}},
			Turns: []Turn{{Content: content}}}
		checkAppendRecord(t, &r)
	})
}

// BenchmarkRecordLine is one record's line: appendRecord beside the
// json.Encoder it replaced.
func BenchmarkRecordLine(b *testing.B) {
	r := Record{ID: "12345", Source: "rows.jsonl:12346", Messages: []Message{{Role: "user", Content: "Question 7: what is the sum of the first 10 odd numbers?"}},
		Content: string(bytes.Repeat([]byte("word "), 64)), FinishReason: "length", Model: "mock-model",
		PromptTokens: 20, CompletionTokens: 64, LatencyMS: 12.345678, TTFTMS: 12.345678, Attempts: 1, CreatedAt: time.Now()}
	b.Run("appendRecord", func(b *testing.B) {
		b.ReportAllocs()
		var line []byte
		for b.Loop() {
			line, _ = appendRecord(line[:0], &r)
		}
	})
	b.Run("encoding_json", func(b *testing.B) {
		b.ReportAllocs()
		enc := json.NewEncoder(io.Discard)
		enc.SetEscapeHTML(false)
		for b.Loop() {
			if err := enc.Encode(&r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
