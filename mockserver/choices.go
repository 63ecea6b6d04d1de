package mockserver

import (
	"strconv"

	"github.com/synthgen/synthgen/mockserver/tokenids"
)

// OpenAI's n: several answers to one prompt in one request, as choices
// 0..n-1 (vLLM computes the prompt once for all of them). Each choice is
// drawn as an answer of its own (choice 0 is the answer n = 1 gets), so
// their contents differ. A stream interleaves the choices token by token,
// as vLLM's batch steps them, each chunk carrying its choice's index; the
// usage counts the prompt once and every choice's tokens. Token ids and
// logprobs are each choice's own, the prompt's ids at the top. The stall
// and mid-answer faults are not drawn for such a request (the faults
// before an answer are).

// maxChoices bounds n as vLLM's default --max-num-seqs would.
const maxChoices = 128

// choices is the number of choices req asks for: its n, 1 when absent or
// when the server ignores n.
func (r *chatRequest) choices(ignore bool) int {
	if ignore || r.N == nil || *r.N < 1 {
		return 1
	}
	return min(*r.N, maxChoices)
}

// choiceHash is the prompt hash choice i's answer is drawn from: choice
// 0's is the prompt's own.
func choiceHash(h uint64, i int) uint64 { return h + uint64(i)*0x9e3779b97f4a7c15 }

// answerN plans n choices and sends them; false when the client went away
// before the answer was complete.
func (g *generation) answerN(req *chatRequest, shape *answerShape, n, prompt int) bool {
	s := g.s
	plans := make([]plan, n)
	replies := make([]*tokenids.Reply, n)
	for i := range plans {
		h := choiceHash(req.promptHash(), i)
		replies[i] = tokenids.NewReply(&req.Fields, s.opts.IgnoreTokenIDs, h, req.contents())
		plans[i] = newPlan(s.opts.Seed, h, s.opts.MeanTokens, req.limit())
		if shape != nil {
			s.shapeAnswer(&plans[i], shape, h, g.id, req.limit())
		}
		s.fitContext(&plans[i], prompt)
	}
	if req.Stream {
		return g.streamN(plans, replies, prompt, req.includeUsage())
	}
	return g.plainN(plans, replies, prompt)
}

// appendChoiceHead appends a stream chunk's frame up to choice i's delta.
func (g *generation) appendChoiceHead(b []byte, i int) []byte {
	b = append(b, "data: "...)
	b = g.appendEnvelope(b, "chat.completion.chunk")
	b = append(b, `"choices":[{"index":`...)
	b = strconv.AppendInt(b, int64(i), 10)
	return append(b, `,"delta":`...)
}

// streamN streams the choices of plans interleaved: step k sends every
// choice's k-th token, then each choice ends with its finish_reason.
func (g *generation) streamN(plans []plan, replies []*tokenids.Reply, prompt int, usage bool) bool {
	s := g.s
	longest, total := 0, 0
	for i := range plans {
		longest = max(longest, plans[i].total)
		total += plans[i].total
	}
	for k := range longest + 1 {
		if !g.pause(k, true) {
			return false
		}
		for i := range plans {
			p, r := &plans[i], replies[i]
			switch {
			case k < p.total:
				g.buf = g.appendChoiceHead(g.buf, i)
				if k == 0 {
					g.buf = append(g.buf, roleDelta...)
					if r != nil {
						g.buf = r.AppendRoleTail(g.buf)
					} else {
						g.buf = append(g.buf, tailNone...)
					}
					g.buf = g.appendChoiceHead(g.buf, i)
				}
				t := p.next()
				if c, shaped := p.piece(k); shaped {
					g.buf = append(g.buf, p.shaped.content[c]...)
				} else if k < p.reasoning && s.opts.ReasoningField != FieldNone {
					g.buf = append(g.buf, s.tok.reason[t]...)
				} else {
					g.buf = append(g.buf, s.tok.content[t]...)
				}
				if r != nil {
					g.buf = r.AppendTokenTail(g.buf, k, t, false)
				} else {
					g.buf = append(g.buf, tailNone...)
				}
				g.pending++
			case k == p.total:
				g.buf = g.appendChoiceHead(g.buf, i)
				g.buf = append(g.buf, emptyDelta...)
				if r != nil {
					g.buf = r.AppendIDsTail(g.buf, p.finish, nil)
				} else if p.finish == "length" {
					g.buf = append(g.buf, tailLength...)
				} else {
					g.buf = append(g.buf, tailStop...)
				}
			}
		}
		if len(g.buf) >= writeChunkBytes && g.write() != nil {
			return false
		}
	}
	if usage {
		g.buf = append(g.buf, "data: "...)
		g.buf = g.appendEnvelope(g.buf, "chat.completion.chunk")
		g.buf = append(g.buf, `"choices":[],"usage":`...)
		g.buf = appendUsage(g.buf, prompt, total, false, s.cached(prompt))
		g.buf = append(g.buf, "}\n\n"...)
	}
	g.buf = append(g.buf, doneFrame...)
	g.finish(plans[0].finish)
	_ = g.flush()
	return true
}

// plainN sends the choices of plans as one chat.completion object.
func (g *generation) plainN(plans []plan, replies []*tokenids.Reply, prompt int) bool {
	s := g.s
	longest, total := 0, 0
	for i := range plans {
		longest = max(longest, plans[i].total)
		total += plans[i].total
	}
	// Paced as the stream is: the answer is whole when its longest choice is.
	for k := range longest {
		if !g.pause(k, false) {
			return false
		}
	}
	g.pending += int64(total)
	g.buf = g.appendEnvelope(g.buf, "chat.completion")
	g.buf = append(g.buf, `"choices":[`...)
	for i := range plans {
		p, r := &plans[i], replies[i]
		if i > 0 {
			g.buf = append(g.buf, ',')
		}
		g.buf = append(g.buf, `{"index":`...)
		g.buf = strconv.AppendInt(g.buf, int64(i), 10)
		g.buf = append(g.buf, `,"message":{"role":"assistant",`...)
		k := 0
		if p.reasoning > 0 && s.opts.ReasoningField != FieldNone {
			field := FieldReasoning
			if s.opts.ReasoningField == FieldReasoningContent {
				field = FieldReasoningContent
			}
			g.buf = append(g.buf, '"')
			g.buf = append(g.buf, field...)
			g.buf = append(g.buf, `":"`...)
			for ; k < p.reasoning && k < p.total; k++ {
				t := p.next()
				g.buf = append(g.buf, s.tok.escaped[t]...)
				r.Note(t)
			}
			g.buf = append(g.buf, `",`...)
		}
		g.buf = append(g.buf, `"content":"`...)
		for ; k < p.total; k++ {
			t := p.next()
			if c, shaped := p.piece(k); shaped {
				g.buf = append(g.buf, p.shaped.escaped[c]...)
			} else {
				g.buf = append(g.buf, s.tok.escaped[t]...)
			}
			r.Note(t)
		}
		g.buf = append(g.buf, `","tool_calls":[]},"logprobs":`...)
		g.buf = r.AppendChoiceLogprobs(g.buf)
		g.buf = append(g.buf, `,"finish_reason":"`...)
		g.buf = append(g.buf, p.finish...)
		g.buf = append(g.buf, `","stop_reason":null`...)
		g.buf = r.AppendChoiceIDs(g.buf)
		g.buf = append(g.buf, '}')
	}
	g.buf = append(g.buf, `],"usage":`...)
	g.buf = appendUsage(g.buf, prompt, total, true, s.cached(prompt))
	g.buf = append(g.buf, `,"prompt_logprobs":null`...)
	g.buf = replies[0].AppendPromptIDs(g.buf)
	g.buf = append(g.buf, '}')
	g.finish(plans[0].finish)
	g.w.Header().Set("Content-Type", "application/json")
	g.w.Header().Set("Content-Length", strconv.Itoa(len(g.buf)))
	_ = g.write()
	return true
}
