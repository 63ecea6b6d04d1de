package mockserver

// Answers in the shape a request asks: a response_format of type
// json_schema (or json_object), or older vLLM's guided_json and newer
// vLLM's structured_outputs.json in the body, makes the answer's content
// JSON valid for the schema, as a server with structured outputs writes
// it. Its reasoning comes first, as ever (a server with a reasoning parser
// applies the grammar only after the thought; with ReasoningField none the
// thought is in think tags before the JSON, as a server that does not
// constrain the thought writes it, which no client can parse as JSON).
//
// The JSON (drawn by schemagen) is a pure function of the seed and the
// prompt. Options.RateInvalidJSON makes a share of answers not valid (cut
// short, a required key missing, a value of the wrong type): which ones is
// a draw from the seed and the arrival number, like the other rates, so a
// retry of the same prompt may well be valid.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"unicode/utf8"

	"github.com/synthgen/synthgen/mockserver/schemagen"
	"github.com/synthgen/synthgen/mockserver/tokenids"
)

// invalidJSONSalt keeps RateInvalidJSON's draw apart from the others'.
const invalidJSONSalt = 0x736368656d61 // "schema"

// FaultInvalidJSON is the kind label of mock_faults_injected_total for an
// answer made not valid for its schema on purpose (Stats.InvalidJSON).
const FaultInvalidJSON = "invalid_json"

// answerShape is what a request asks its content to be.
type answerShape struct {
	root   any  // the JSON Schema, decoded; nil for json_object
	object bool // json_object: some JSON object
}

// requestShape reads the shape a request asks for: its response_format,
// else guided_json (vLLM before 0.12) or structured_outputs.json (the
// vLLM releases that replaced it); nil when none. Its error is the 400 a
// server answers.
func (r *chatRequest) requestShape() (*answerShape, error) {
	if len(r.ResponseFormat) > 0 && !isNull(r.ResponseFormat) {
		var rf struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		}
		if err := json.Unmarshal(r.ResponseFormat, &rf); err != nil {
			return nil, fmt.Errorf("response_format: %v", err)
		}
		switch rf.Type {
		case "text":
			return nil, nil
		case "json_object":
			return &answerShape{object: true}, nil
		case "json_schema":
			if rf.JSONSchema == nil || len(rf.JSONSchema.Schema) == 0 {
				return nil, errors.New("response_format.json_schema.schema: field required")
			}
			return schemaShape("response_format.json_schema.schema", rf.JSONSchema.Schema)
		}
		return nil, fmt.Errorf("response_format.type: %q is not one of text, json_object, json_schema", rf.Type)
	}
	if len(r.GuidedJSON) > 0 && !isNull(r.GuidedJSON) {
		return schemaShape("guided_json", r.GuidedJSON)
	}
	if len(r.StructuredOutputs) > 0 && !isNull(r.StructuredOutputs) {
		var so struct {
			JSON json.RawMessage `json:"json"`
		}
		if err := json.Unmarshal(r.StructuredOutputs, &so); err != nil {
			return nil, fmt.Errorf("structured_outputs: %v", err)
		}
		if len(so.JSON) > 0 {
			return schemaShape("structured_outputs.json", so.JSON)
		}
	}
	return nil, nil
}

func isNull(b []byte) bool { return bytes.Equal(bytes.TrimSpace(b), []byte("null")) }

// schemaShape decodes a schema given as an object, or as a string holding
// one (vLLM takes guided_json either way).
func schemaShape(field string, raw json.RawMessage) (*answerShape, error) {
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return nil, fmt.Errorf("%s: %v", field, err)
	}
	if s, ok := v.(string); ok {
		if err := json.Unmarshal([]byte(s), &v); err != nil {
			return nil, fmt.Errorf("%s: a string that is no JSON Schema: %v", field, err)
		}
	}
	if _, ok := v.(map[string]any); !ok {
		return nil, fmt.Errorf("%s: must be a JSON Schema object", field)
	}
	return &answerShape{root: v}, nil
}

// shapedText is an answer's JSON content cut into token pieces.
type shapedText struct {
	escaped [][]byte // each piece inside a JSON string: for plain answers
	content [][]byte // each piece as a content delta
	closing [][]byte // each piece after the think tags, as a content delta (ReasoningField none)
}

// piece reports whether the i-th token of p is a piece of its JSON, and which.
func (p *plan) piece(i int) (int, bool) {
	k := i - p.reasoning
	return k, p.shaped != nil && k >= 0 && k < len(p.shaped.escaped)
}

// shapeAnswer makes p's content the JSON sh asks for: the answer is its
// reasoning, then the JSON, cut at max_tokens (limit) when both do not
// fit. The length fault, which comes after, runs it to limit: its tokens
// past the JSON are word pieces.
func (s *Server) shapeAnswer(p *plan, sh *answerShape, hash, id uint64, limit int) {
	rng := rand.New(rand.NewPCG(uint64(s.opts.Seed)^0x6a736f6e, hash))
	g := schemagen.New(rng, sh.root, tokenids.Vocabulary[:])
	var v any
	if sh.object {
		v = map[string]any{"answer": g.Words(1, 6), "value": rng.IntN(100)}
	} else {
		v = g.Value()
	}
	text, err := schemagen.Marshal(v)
	if err != nil {
		text = []byte(`{}`)
	}
	if s.opts.RateInvalidJSON > 0 && s.draw(id, invalidJSONSalt) < s.opts.RateInvalidJSON {
		text = schemagen.Spoil(v, text, sh.root, int(s.draw(id, invalidJSONSalt+1)*schemagen.SpoilKinds))
		s.invalidJSON.Add(1)
		s.faultsMetric.WithLabelValues(FaultInvalidJSON).Inc()
	}
	p.shaped = splitPieces(text, s.opts.ReasoningField == FieldNone)
	p.total, p.finish = p.reasoning+len(p.shaped.escaped), "stop"
	if p.total > limit {
		p.total, p.finish = limit, "length"
		p.reasoning = min(p.reasoning, limit)
	}
}

// splitPieces cuts text into pieces of about four bytes, on character
// boundaries, each JSON-encoded for the plain and the streamed answer.
func splitPieces(text []byte, none bool) *shapedText {
	st := &shapedText{}
	for len(text) > 0 {
		n := min(4, len(text))
		for n < len(text) && !utf8.RuneStart(text[n]) {
			n++
		}
		piece := string(text[:n])
		text = text[n:]
		q := quote(piece)
		st.escaped = append(st.escaped, q[1:len(q)-1])
		st.content = append(st.content, delta("content", q))
		if none && len(st.closing) == 0 {
			st.closing = append(st.closing, delta("content", quote(thinkClose+piece)))
		}
	}
	return st
}
