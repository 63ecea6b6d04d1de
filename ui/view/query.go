package view

import (
	"cmp"
	"math"
	"slices"
	"strings"
)

// Query is what the records table asks of the index.
type Query struct {
	Dir         int    // -1: every directory
	Truncated   bool   // finish_reason "length"
	NoReasoning bool   // no reasoning
	ThinkTags   bool   // think tags in content
	Errors      bool   // keys with error records: failed for good, or answered after failing
	ToolCalls   bool   // the target called a tool
	Diverged    bool   // the conversation left the row's (Divergence)
	MinTokens   int    // completion tokens, at least; -1: no bound
	MaxTokens   int    // completion tokens, at most; -1: no bound
	Finish      string // one finish reason ("error: CAUSE" for a failed key); "": any
	Text        string // searched in content and reasoning (Search); Select ignores it
	Sort        string // one of Sorts; "": the order of the parts
	Desc        bool
}

// AnyQuery is every record, in part order.
var AnyQuery = Query{Dir: -1, MinTokens: -1, MaxTokens: -1}

// Sorts are the orders the table offers, by the field they sort by.
var Sorts = []string{"", "completion_tokens", "prompt_tokens", "reasoning_chars", "content_chars", "latency", "ttft"}

// selection is a cached Select.
type selection struct {
	q       Query
	version uint64
	pos     []int32
}

// Select returns the positions of the entries q asks for, in q's order.
// The last answer is cached until the entries change, so that paging
// through one query costs a slice. The slice is shared: read it only.
func (ix *Index) Select(q Query) []int32 {
	q.Text = ""
	ix.cacheMu.Lock()
	defer ix.cacheMu.Unlock()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if s := ix.sel; s != nil && s.q == q && s.version == ix.version {
		return s.pos
	}
	ix.sel = nil // its memory may go while the new one is made
	fin, finOK := -1, true
	if q.Finish != "" {
		c, ok := ix.finCode[q.Finish]
		fin, finOK = int(c), ok
	}
	var pos []int32
	for i := 0; finOK && i < ix.n; i++ {
		b, j := ix.at(i)
		f := b.flags[j]
		switch {
		case f&flagDead != 0,
			f&flagFailed != 0 && !q.Errors,
			q.Errors && f&(flagFailed|flagErrHistory) == 0,
			q.Truncated && f&flagTruncated == 0,
			q.NoReasoning && (f&flagNoReasoning == 0 || f&flagFailed != 0),
			q.ThinkTags && f&flagThinkTags == 0,
			q.ToolCalls && f&flagToolCalls == 0,
			q.Diverged && f&flagDiverged == 0,
			q.MinTokens >= 0 && int64(b.compl[j]) < int64(q.MinTokens),
			q.MaxTokens >= 0 && int64(b.compl[j]) > int64(q.MaxTokens),
			fin >= 0 && int(b.finish[j]) != fin,
			q.Dir >= 0 && ix.segs[b.loc[j]>>locBits].dir != q.Dir:
			continue
		}
		pos = append(pos, int32(i))
	}
	if q.Sort != "" {
		ix.sortLocked(pos, q.Sort, q.Desc)
	} else if q.Desc {
		slices.Reverse(pos)
	}
	ix.sel = &selection{q: q, version: ix.version, pos: pos}
	return pos
}

// sortLocked orders pos by the field by, ties in part order.
func (ix *Index) sortLocked(pos []int32, by string, desc bool) {
	type kp struct {
		k float32
		p int32
	}
	ks := make([]kp, len(pos))
	for i, p := range pos {
		b, j := ix.at(int(p))
		var k float32
		switch by {
		case "completion_tokens":
			k = float32(b.compl[j])
		case "prompt_tokens":
			k = float32(b.prompt[j])
		case "reasoning_chars":
			k = float32(b.rlen[j])
		case "content_chars":
			k = float32(b.clen[j])
		case "latency":
			k = b.lat[j]
		case "ttft":
			k = b.ttft[j]
		}
		ks[i] = kp{k, p}
	}
	slices.SortFunc(ks, func(a, b kp) int {
		c := cmp.Compare(a.k, b.k)
		if desc {
			c = -c
		}
		return cmp.Or(c, cmp.Compare(a.p, b.p))
	})
	for i := range ks {
		pos[i] = ks[i].p
	}
}

// Count is a name and how many.
type Count struct {
	Name  string `json:"name"`
	Count int64  `json:"count"`
}

// Hist is the distribution of one figure over the records: bins of Width
// from 0, and the figures people quote (nearest-rank percentiles).
type Hist struct {
	Unit   string  `json:"unit"`
	Width  float64 `json:"width"`
	Counts []int64 `json:"counts"`
	N      int64   `json:"n"`
	Sum    float64 `json:"sum"`
	Mean   float64 `json:"mean"`
	P50    float64 `json:"p50"`
	P90    float64 `json:"p90"`
	Max    float64 `json:"max"`
}

// histBins is how many bins a distribution has.
const histBins = 50

// histOf is the distribution of vals (sorted in place) over histBins bins
// reaching at least hi; integer figures get whole-number bin widths.
func histOf(vals []float32, unit string, hi float64, integer bool, scale float64) Hist {
	slices.Sort(vals)
	h := Hist{Unit: unit, Counts: make([]int64, histBins), N: int64(len(vals))}
	if len(vals) > 0 {
		h.Max = float64(vals[len(vals)-1]) * scale
	}
	hi = max(hi, h.Max)
	h.Width = hi / histBins
	if integer {
		h.Width = math.Max(1, math.Ceil(h.Width))
	}
	if h.Width <= 0 {
		h.Width = 1
	}
	for _, v := range vals {
		x := float64(v) * scale
		h.Sum += x
		b := min(int(x/h.Width), histBins-1)
		h.Counts[max(b, 0)]++
	}
	if n := len(vals); n > 0 {
		h.Mean = h.Sum / float64(n)
		h.P50 = float64(vals[rank(n, 0.5)]) * scale
		h.P90 = float64(vals[rank(n, 0.9)]) * scale
	}
	return h
}

// rank is the nearest-rank index of quantile q among n sorted values, as
// the run's own percentiles (runstats) are taken.
func rank(n int, q float64) int {
	return min(max(int(math.Ceil(q*float64(n)))-1, 0), n-1)
}

// Dist is what the records on disk say as a whole: counts, finish reasons
// and the distributions the run page plots.
type Dist struct {
	Version          uint64  `json:"version"`
	Records          int64   `json:"records"`               // readable records, every directory
	Failed           int64   `json:"failed"`                // keys that failed for good
	ErrHistory       int64   `json:"answered_after_errors"` // records whose key failed before
	Truncated        int64   `json:"truncated"`
	NoReasoning      int64   `json:"empty_reasoning"`
	ThinkTags        int64   `json:"think_tags"`
	ToolCalls        int64   `json:"tool_call_records"` // the target called a tool, in any turn
	Diverged         int64   `json:"diverged"`          // a conversation with tools left the row's
	PromptTokens     int64   `json:"prompt_tokens"`
	CompletionTokens int64   `json:"completion_tokens"`
	Finish           []Count `json:"finish_reasons"` // records by finish reason, then failed keys by cause
	MaxTokens        int     `json:"max_tokens"`     // the job's generation.max_tokens; 0: unknown
	Completion       Hist    `json:"completion_tokens_hist"`
	Reasoning        Hist    `json:"reasoning_chars_hist"`
	Content          Hist    `json:"content_chars_hist"`
	Latency          Hist    `json:"latency_hist"`
	TTFT             Hist    `json:"ttft_hist"`
}

// Finishes counts the live entries by finish reason (a failed key's is
// "error: CAUSE"), most first, errors last: the table's choices. One pass
// over the index, without the distributions.
func (ix *Index) Finishes() []Count {
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	by := make([]int64, len(ix.finish))
	for i := 0; i < ix.n; i++ {
		if b, j := ix.at(i); b.flags[j]&flagDead == 0 {
			by[b.finish[j]]++
		}
	}
	return ix.countsLocked(by)
}

// countsLocked lists the finish reasons of by, most first, errors last.
func (ix *Index) countsLocked(by []int64) []Count {
	var out []Count
	for c, n := range by {
		if n > 0 {
			out = append(out, Count{Name: ix.finish[c], Count: n})
		}
	}
	slices.SortFunc(out, func(a, b Count) int {
		af, bf := strings.HasPrefix(a.Name, "error: "), strings.HasPrefix(b.Name, "error: ")
		if af != bf {
			if af {
				return 1
			}
			return -1
		}
		return cmp.Or(cmp.Compare(b.Count, a.Count), cmp.Compare(a.Name, b.Name))
	})
	return out
}

// Dist is the index's distributions, cached until the entries change;
// maxTokens is marked on the completion tokens' by the page.
func (ix *Index) Dist(maxTokens int) *Dist {
	ix.cacheMu.Lock()
	defer ix.cacheMu.Unlock()
	ix.mu.RLock()
	defer ix.mu.RUnlock()
	if d := ix.dist; d != nil && d.Version == ix.version && d.MaxTokens == maxTokens {
		return d
	}
	d := &Dist{Version: ix.version, MaxTokens: maxTokens}
	byFinish := make([]int64, len(ix.finish))
	for i := 0; i < ix.n; i++ {
		b, j := ix.at(i)
		f := b.flags[j]
		if f&flagDead != 0 {
			continue
		}
		byFinish[b.finish[j]]++
		if f&flagFailed != 0 {
			d.Failed++
			continue
		}
		d.Records++
		if f&flagErrHistory != 0 {
			d.ErrHistory++
		}
		if f&flagTruncated != 0 {
			d.Truncated++
		}
		if f&flagNoReasoning != 0 {
			d.NoReasoning++
		}
		if f&flagThinkTags != 0 {
			d.ThinkTags++
		}
		if f&flagToolCalls != 0 {
			d.ToolCalls++
		}
		if f&flagDiverged != 0 {
			d.Diverged++
		}
		d.PromptTokens += int64(b.prompt[j])
		d.CompletionTokens += int64(b.compl[j])
	}
	d.Finish = ix.countsLocked(byFinish)
	// One figure at a time, in one buffer: 4 bytes a record at most.
	vals := make([]float32, 0, d.Records)
	collect := func(get func(b *block, j int) float32) []float32 {
		vals = vals[:0]
		for i := 0; i < ix.n; i++ {
			if b, j := ix.at(i); b.flags[j]&(flagDead|flagFailed) == 0 {
				vals = append(vals, get(b, j))
			}
		}
		return vals
	}
	// The axis runs to the longest answer, not to max_tokens: answers of a
	// few hundred tokens under a max_tokens of 8192 would sit in two bars.
	// The page marks max_tokens when it is on the axis and names it when not.
	d.Completion = histOf(collect(func(b *block, j int) float32 { return float32(b.compl[j]) }), "tokens", 0, true, 1)
	d.Reasoning = histOf(collect(func(b *block, j int) float32 { return float32(b.rlen[j]) }), "characters", 0, true, 1)
	d.Content = histOf(collect(func(b *block, j int) float32 { return float32(b.clen[j]) }), "characters", 0, true, 1)
	d.Latency = histOf(collect(func(b *block, j int) float32 { return b.lat[j] }), "s", 0, false, 1e-3)
	d.TTFT = histOf(collect(func(b *block, j int) float32 { return b.ttft[j] }), "s", 0, false, 1e-3)
	ix.dist = d
	return d
}
