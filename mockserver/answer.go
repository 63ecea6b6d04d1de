package mockserver

import (
	"encoding/json"
	"math"
	"math/rand/v2"

	"github.com/synthgen/synthgen/mockserver/tokenids"
)

// tokens holds each vocabulary piece (tokenids.Vocabulary) JSON-encoded, in the shapes the
// handlers splice into responses, so no response is built with json.Marshal.
type tokens struct {
	escaped [][]byte // the JSON string's inside, without quotes: for plain answers
	content [][]byte // {"content":"piece"}
	reason  [][]byte // the reasoning delta for the server's ReasoningField
	// With FieldNone, the first reasoning token and the first content token
	// as content deltas carrying the think tags (thinkOpen, thinkClose)
	// before their piece.
	openTag, closeTag [][]byte
}

// The think tags a reasoning model writes around its thought. A server
// without a reasoning parser passes them through in content, as vLLM
// started without --reasoning-parser does: "<think>\n...\n</think>\n\n"
// and then the answer.
const (
	thinkOpen  = "<think>\n"
	thinkClose = "\n</think>\n\n"
)

// The think tags inside a JSON string, for plain answers.
var (
	escapedOpen  = unquoted(thinkOpen)
	escapedClose = unquoted(thinkClose)
)

func unquoted(s string) []byte {
	q := quote(s)
	return q[1 : len(q)-1]
}

func newTokens(reasoningField string) *tokens {
	t := &tokens{}
	for _, piece := range tokenids.Vocabulary {
		q, err := json.Marshal(piece)
		if err != nil {
			panic(err) // a string always marshals
		}
		t.escaped = append(t.escaped, q[1:len(q)-1])
		t.content = append(t.content, delta("content", q))
		switch reasoningField {
		case FieldReasoning, FieldReasoningContent:
			t.reason = append(t.reason, delta(reasoningField, q))
		case FieldBoth:
			b := delta(FieldReasoning, q)
			b = b[:len(b)-1]
			b = append(b, `,"`+FieldReasoningContent+`":`...)
			b = append(b, q...)
			b = append(b, '}')
			t.reason = append(t.reason, b)
		case FieldNone:
			// A server without a reasoning parser: the whole answer is
			// content, the thought in think tags before the answer.
			t.reason = append(t.reason, delta("content", q))
			t.openTag = append(t.openTag, delta("content", quote(thinkOpen+piece)))
			t.closeTag = append(t.closeTag, delta("content", quote(thinkClose+piece)))
		}
	}
	return t
}

func quote(s string) []byte {
	q, err := json.Marshal(s)
	if err != nil {
		panic(err) // a string always marshals
	}
	return q
}

func delta(field string, quoted []byte) []byte {
	b := append([]byte(`{"`), field...)
	b = append(b, `":`...)
	b = append(b, quoted...)
	return append(b, '}')
}

// plan is one answer decided up front: how many tokens, how many of them are
// reasoning, why it ends, and the generator that picks the pieces.
type plan struct {
	total     int // tokens to generate, after the max_tokens cap
	reasoning int // the first reasoning tokens are reasoning, the rest content
	finish    string
	rng       rand.PCG
	shaped    *shapedText // the content as JSON in the shape asked (schema.go); nil: word pieces
}

// lengthSigma shapes the long tail of answer lengths: with a lognormal of
// this sigma, one answer in a hundred is about 4x the mean.
const lengthSigma = 0.7

// newPlan draws an answer's shape from (seed, prompt hash) alone, so the same
// request always gets the same answer.
func newPlan(seed int64, hash uint64, meanTokens, limit int) plan {
	p := plan{rng: *rand.NewPCG(uint64(seed), hash)}
	// Box-Muller, written out: rand.Rand would allocate per request.
	u1 := float64(p.rng.Uint64()>>11+1) / (1 << 53)
	u2 := float64(p.rng.Uint64()>>11) / (1 << 53)
	z := math.Sqrt(-2*math.Log(u1)) * math.Cos(2*math.Pi*u2)
	mu := math.Log(float64(meanTokens)) - lengthSigma*lengthSigma/2
	drawn := int(math.Round(math.Exp(mu + lengthSigma*z)))
	drawn = min(max(drawn, 2), maxTokenLimit)

	p.total, p.finish = drawn, "stop"
	if drawn > limit {
		p.total, p.finish = limit, "length"
	}
	// Reasoning takes 50-80% of the answer; both parts stay non-empty when
	// there are at least two tokens.
	frac := 0.5 + 0.3*float64(p.rng.Uint64()>>11)/(1<<53)
	p.reasoning = int(math.Round(float64(p.total) * frac))
	if p.total >= 2 {
		p.reasoning = min(max(p.reasoning, 1), p.total-1)
	} else {
		p.reasoning = p.total
	}
	return p
}

// next returns the index of the next token piece.
func (p *plan) next() int {
	return int(p.rng.Uint64() % uint64(len(tokenids.Vocabulary)))
}
