package wire

// The request body, written by hand: temperature 0 and extra_body reach
// the server as configured, and a row's own fields replace the job's.

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"

	"github.com/synthgen/synthgen/internal/jsonw"
)

// EncodeRequest builds the exact JSON body of a chat completion request:
// model, messages, max_tokens (when > 0), temperature (always, 0 included),
// top_p (when > 0), stream, stream_options when streaming, then Extra's keys
// in sorted order, then the row's Params in sorted order, each replacing the
// field of the same name.
func EncodeRequest(req Request) ([]byte, error) {
	if _, ok := req.Extra["stream"]; ok {
		return nil, errors.New(`extra_body: "stream" is set by generation.stream, not extra_body`)
	}
	for _, k := range []string{"stream", "stream_options", "model", "messages"} {
		if _, ok := req.Params[k]; ok {
			return nil, fmt.Errorf("the row's %q cannot replace the job's", k)
		}
	}
	if math.IsNaN(req.Temperature) || math.IsInf(req.Temperature, 0) {
		return nil, fmt.Errorf("temperature: %v is not a JSON number", req.Temperature)
	}
	if math.IsNaN(req.TopP) || math.IsInf(req.TopP, 0) {
		return nil, fmt.Errorf("top_p: %v is not a JSON number", req.TopP)
	}
	n := 128
	for _, m := range req.Messages {
		n += len(m.Role) + len(m.Content) + 32
	}
	b := make([]byte, 0, n)
	b = append(b, '{')
	first := true
	key := func(k string) bool {
		if _, over := req.Extra[k]; over || req.rowHas(k) {
			return false
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonw.AppendString(b, k)
		b = append(b, ':')
		return true
	}
	if key("model") {
		b = jsonw.AppendString(b, req.Model)
	}
	if key("messages") {
		b = append(b, '[')
		for i, m := range req.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = jsonw.AppendString(b, m.Role)
			b = append(b, `,"content":`...)
			b = jsonw.AppendString(b, m.Content)
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	if req.MaxTokens > 0 && key("max_tokens") {
		b = strconv.AppendInt(b, int64(req.MaxTokens), 10)
	}
	if key("temperature") {
		b = strconv.AppendFloat(b, req.Temperature, 'g', -1, 64)
	}
	if req.TopP > 0 && key("top_p") {
		b = strconv.AppendFloat(b, req.TopP, 'g', -1, 64)
	}
	if key("stream") {
		b = strconv.AppendBool(b, req.Stream)
	}
	if req.Stream && key("stream_options") {
		b = append(b, `{"include_usage":true}`...)
	}
	var err error
	if b, first, err = appendFields(b, first, "extra_body.", req.Extra, req.rowHas); err != nil {
		return nil, err
	}
	if b, _, err = appendFields(b, first, "the row's ", req.Params, nil); err != nil {
		return nil, err
	}
	b = append(b, '}')
	return b, nil
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

// appendFields appends the fields of m in key order, but those skip says
// another source replaces; what names them in an error.
func appendFields(b []byte, first bool, what string, m map[string]any, skip func(string) bool) ([]byte, bool, error) {
	if len(m) == 0 {
		return b, first, nil
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
			return b, first, fmt.Errorf("%s%s: %w", what, k, err)
		}
		if !first {
			b = append(b, ',')
		}
		first = false
		b = jsonw.AppendString(b, k)
		b = append(b, ':')
		b = append(b, v...)
	}
	return b, first, nil
}
