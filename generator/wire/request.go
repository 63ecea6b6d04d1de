package wire

// The request body, its fields in a fixed order and their values by
// encoding/json: temperature 0 and extra_body reach the server as
// configured, and a row's own fields replace the job's. (Its strings were
// written by hand until 2026-12-01: under 3% of a plain request's CPU,
// docs/decisions/2026-11-plain-request-cpu.md.)

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/synthgen/synthgen/job"
)

// EncodeRequest builds the exact JSON body of a chat completion request:
// model, messages, tools and tool_choice (when the row has tools),
// max_tokens (when > 0), temperature (always, 0 included),
// top_p (when > 0), n (when N > 1), stream, stream_options when streaming,
// response_format when the job asks for a shape, return_token_ids when
// ReturnTokenIDs, logprobs, top_logprobs and return_tokens_as_token_ids
// when Logprobs > 0, then Extra's keys in sorted order, then the row's
// Params in sorted order, each replacing the field of the same name.
func EncodeRequest(req Request) ([]byte, error) {
	if err := checkRequest(&req); err != nil {
		return nil, err
	}
	n := 128
	for _, m := range req.Messages {
		n += len(m.Role) + len(m.Content) + 32
	}
	w := newBodyWriter(n)
	w.buf.WriteByte('{')
	first, err := w.jobFields(&req)
	if err != nil {
		return nil, err
	}
	if first, err = w.fields(first, "extra_body.", req.Extra, req.rowHas); err != nil {
		return nil, err
	}
	if _, err = w.fields(first, "the row's ", req.Params, nil); err != nil {
		return nil, err
	}
	if w.err != nil {
		return nil, w.err
	}
	w.buf.WriteByte('}')
	return w.buf.Bytes(), nil
}

// checkRequest refuses a request whose body could not be what it means:
// a field only synthgen sets that extra_body or the row would replace, a
// temperature or top_p that JSON cannot hold.
func checkRequest(req *Request) error {
	if _, ok := req.Extra["stream"]; ok {
		return errors.New(`extra_body: "stream" is set by generation.stream, not extra_body`)
	}
	for _, k := range []string{"stream", "stream_options", "model", "messages"} {
		if _, ok := req.Params[k]; ok {
			return fmt.Errorf("the row's %q cannot replace the job's", k)
		}
	}
	if math.IsNaN(req.Temperature) || math.IsInf(req.Temperature, 0) {
		return fmt.Errorf("temperature: %v is not a JSON number", req.Temperature)
	}
	if math.IsNaN(req.TopP) || math.IsInf(req.TopP, 0) {
		return fmt.Errorf("top_p: %v is not a JSON number", req.TopP)
	}
	return nil
}

// jobFields writes the fields synthgen sets itself, in EncodeRequest's
// order, each one left out when extra_body or the row sets it instead
// (fields writes those after). first says whether none was written.
func (w *bodyWriter) jobFields(req *Request) (first bool, err error) {
	first = true
	key := func(k string) bool {
		if _, over := req.Extra[k]; over || req.rowHas(k) {
			return false
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		// k is one of the names below, which need no escaping.
		w.buf.WriteByte('"')
		w.buf.WriteString(k)
		w.buf.WriteString(`":`)
		return true
	}
	if key("model") {
		w.value(req.Model)
	}
	if key("messages") {
		w.messages(req.Messages)
	}
	if req.Tools != "" {
		if !json.Valid([]byte(req.Tools)) {
			return first, errors.New("tools: the row's tools are not JSON")
		}
		if key("tools") {
			w.buf.WriteString(req.Tools)
		}
		if key("tool_choice") {
			choice := req.ToolChoice
			if choice == "" {
				choice = ToolChoiceAuto
			}
			w.value(choice)
		}
	}
	if req.MaxTokens > 0 && key("max_tokens") {
		w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), int64(req.MaxTokens), 10))
	}
	if key("temperature") {
		w.buf.Write(strconv.AppendFloat(w.buf.AvailableBuffer(), req.Temperature, 'g', -1, 64))
	}
	if req.TopP > 0 && key("top_p") {
		w.buf.Write(strconv.AppendFloat(w.buf.AvailableBuffer(), req.TopP, 'g', -1, 64))
	}
	if req.N > 1 && key("n") {
		w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), int64(req.N), 10))
	}
	if key("stream") {
		w.buf.Write(strconv.AppendBool(w.buf.AvailableBuffer(), req.Stream))
	}
	if req.Stream && key("stream_options") {
		w.buf.WriteString(`{"include_usage":true}`)
	}
	if req.ResponseFormat.Set() && key("response_format") {
		w.responseFormat(req.ResponseFormat)
	}
	if req.ReturnTokenIDs && key("return_token_ids") {
		w.buf.WriteString("true")
	}
	if req.Logprobs > 0 {
		if key("logprobs") {
			w.buf.WriteString("true")
		}
		if key("top_logprobs") {
			w.buf.Write(strconv.AppendInt(w.buf.AvailableBuffer(), int64(req.Logprobs), 10))
		}
		// The alternatives named by id ("token_id:N") rather than by
		// their text, which is neither unique nor always valid UTF-8.
		if key("return_tokens_as_token_ids") {
			w.buf.WriteString("true")
		}
	}
	return first, nil
}

// bodyWriter writes the body's strings and messages with encoding/json,
// HTML escaping off (model output and prompts are full of <, > and &).
type bodyWriter struct {
	buf bytes.Buffer
	enc *json.Encoder
	err error
}

func newBodyWriter(n int) *bodyWriter {
	w := &bodyWriter{}
	w.buf.Grow(n)
	w.enc = json.NewEncoder(&w.buf)
	w.enc.SetEscapeHTML(false)
	return w
}

// value appends v without the newline the Encoder ends it with.
func (w *bodyWriter) value(v any) {
	if w.err != nil {
		return
	}
	if w.err = w.enc.Encode(v); w.err == nil {
		w.buf.Truncate(w.buf.Len() - 1)
	}
}

// responseFormat writes OpenAI's response_format: {"type":"json_object"},
// or {"type":"json_schema","json_schema":{"name","schema","strict"}} with
// the schema's text as the job holds it (its keys in the order written:
// a server's grammar writes properties in that order).
func (w *bodyWriter) responseFormat(f job.ResponseFormat) {
	if f.Type != job.FormatJSONSchema {
		w.buf.WriteString(`{"type":`)
		w.value(f.Type)
		w.buf.WriteByte('}')
		return
	}
	if !json.Valid(f.Schema) {
		if w.err == nil {
			w.err = errors.New("response_format: the schema is not JSON")
		}
		return
	}
	w.buf.WriteString(`{"type":"json_schema","json_schema":{"name":`)
	w.value(f.Name)
	w.buf.WriteString(`,"schema":`)
	w.buf.Write(f.Schema)
	w.buf.WriteString(`,"strict":`)
	w.buf.Write(strconv.AppendBool(w.buf.AvailableBuffer(), f.Strict))
	w.buf.WriteString(`}}`)
}

// rowHas says whether the row's own fields replace the job's field k. The
// two spellings of the answer's length are one setting: a row that says
// max_completion_tokens replaces the job's max_tokens too, or the server
// would get both and vLLM would take the job's max_completion_tokens over
// the row's max_tokens.
func (req *Request) rowHas(k string) bool {
	if len(req.Params) == 0 {
		return false
	}
	if _, ok := req.Params[k]; ok {
		return true
	}
	switch k {
	case "max_tokens":
		_, ok := req.Params["max_completion_tokens"]
		return ok
	case "max_completion_tokens":
		_, ok := req.Params["max_tokens"]
		return ok
	}
	return false
}

// fields appends the fields of m in key order, but those skip says
// another source replaces; what names them in an error. A value is
// json.Marshal's (HTML escaped), as it always was.
func (w *bodyWriter) fields(first bool, what string, m map[string]any, skip func(string) bool) (bool, error) {
	if len(m) == 0 {
		return first, nil
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		if skip == nil || !skip(k) {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		v, err := json.Marshal(m[k])
		if err != nil {
			return first, fmt.Errorf("%s%s: %w", what, k, err)
		}
		if !first {
			w.buf.WriteByte(',')
		}
		first = false
		w.value(k)
		w.buf.WriteByte(':')
		w.buf.Write(v)
	}
	return first, nil
}
