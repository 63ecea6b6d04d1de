package shape

// Tools in rows, OpenAI's shape: an assistant turn's tool_calls
// ([{id, type: "function", function: {name, arguments}}], content possibly
// null), a tool turn's tool_call_id, and the row's tools list beside its
// turns ([{type: "function", function: {name, description, parameters}}],
// or a JSON string of it, as xlam's and glaive's columns hold it). They are
// sent as the row has them; a malformed one is a bad row naming its field.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"

	"github.com/synthgen/synthgen/chat"
)

// ErrNotJSON: a column meant to hold JSON text does not.
var ErrNotJSON = errors.New("not JSON")

// toolCalls reads an assistant turn's tool_calls at field at: absent or
// null is none; otherwise a list of calls each with a function name.
func toolCalls(v any, at string) ([]chat.ToolCall, *FieldError) {
	if v == nil {
		return nil, nil
	}
	items, ok := v.([]any)
	if !ok {
		return nil, fieldErr(at, ErrNotList)
	}
	calls := make([]chat.ToolCall, 0, len(items))
	for i, it := range items {
		here := at + "[" + strconv.Itoa(i) + "]"
		obj, ok := it.(map[string]any)
		if !ok {
			return nil, fieldErr(here, ErrNotObject)
		}
		var c chat.ToolCall
		var fe *FieldError
		if c.ID, fe = optionalString(obj, "id", here+".id"); fe != nil {
			return nil, fe
		}
		if c.Type, fe = functionType(obj, here); fe != nil {
			return nil, fe
		}
		fn, ok := obj["function"].(map[string]any)
		if !ok {
			if obj["function"] == nil {
				return nil, fieldErr(here+".function", ErrMissing)
			}
			return nil, fieldErr(here+".function", ErrNotObject)
		}
		if c.Function.Name, fe = toolName(fn, here+".function.name"); fe != nil {
			return nil, fe
		}
		if c.Function.Arguments, fe = arguments(fn["arguments"], here+".function.arguments"); fe != nil {
			return nil, fe
		}
		calls = append(calls, c)
	}
	return calls, nil
}

// arguments is a call's arguments as JSON text: a string as written (a
// model's arguments are kept as they were, valid JSON or not), an object
// encoded.
func arguments(v any, at string) (string, *FieldError) {
	switch a := v.(type) {
	case nil:
		return "", fieldErr(at, ErrMissing)
	case string:
		return a, nil
	case []byte:
		return string(a), nil
	case map[string]any:
		b, err := marshal(a)
		if err != nil {
			return "", fieldErr(at, err)
		}
		return string(b), nil
	}
	return "", fieldErr(at, errors.New("not a string or object"))
}

// functionType is a call's or tool's type: "function", the only one a chat
// completion knows, when absent too.
func functionType(obj map[string]any, at string) (string, *FieldError) {
	t, fe := optionalString(obj, "type", at+".type")
	if fe != nil {
		return "", fe
	}
	if t != "" && t != "function" {
		return "", fieldErr(at+".type", fmt.Errorf("%q, want \"function\"", t))
	}
	return "function", nil
}

func toolName(obj map[string]any, at string) (string, *FieldError) {
	name, fe := stringField(obj, "name", at)
	if fe != nil {
		return "", fe
	}
	if name == "" {
		return "", fieldErr(at, ErrEmpty)
	}
	return name, nil
}

func optionalString(obj map[string]any, key, at string) (string, *FieldError) {
	v := obj[key]
	if v == nil {
		return "", nil
	}
	s, ok := asString(v)
	if !ok {
		return "", fieldErr(at, ErrNotString)
	}
	return s, nil
}

// Tools reads a row's tools column v, at field: absent, null or an empty list
// is none; a list, or JSON text of one. Each tool is OpenAI's
// {type: "function", function: {name, description, parameters}}; a bare
// function object ({name, description, parameters}: xlam's, glaive's) is
// taken as one. The result is the list as sent, JSON text (object keys in
// sorted order: a decoded row keeps no order).
func Tools(v any, field string) (string, *FieldError) {
	if s, ok := asString(v); ok {
		if len(bytes.TrimSpace([]byte(s))) == 0 {
			return "", nil
		}
		var parsed any // its own variable: decoding into &v would put v on the heap for every row, with tools or not
		d := json.NewDecoder(bytes.NewReader([]byte(s)))
		d.UseNumber()
		if err := d.Decode(&parsed); err != nil {
			return "", fieldErr(field, fmt.Errorf("%w: %v", ErrNotJSON, err))
		}
		v = parsed
	}
	if v == nil {
		return "", nil
	}
	items, ok := v.([]any)
	if !ok {
		return "", fieldErr(field, ErrNotList)
	}
	if len(items) == 0 {
		return "", nil
	}
	out := make([]any, len(items))
	for i, it := range items {
		at := field + "[" + strconv.Itoa(i) + "]"
		obj, ok := it.(map[string]any)
		if !ok {
			return "", fieldErr(at, ErrNotObject)
		}
		if _, wrapped := obj["function"]; !wrapped && obj["type"] == nil {
			obj = map[string]any{"type": "function", "function": obj}
		}
		if _, fe := functionType(obj, at); fe != nil {
			return "", fe
		}
		fn, ok := obj["function"].(map[string]any)
		if !ok {
			if obj["function"] == nil {
				return "", fieldErr(at+".function.name", ErrMissing)
			}
			return "", fieldErr(at+".function", ErrNotObject)
		}
		if _, fe := toolName(fn, at+".function.name"); fe != nil {
			return "", fe
		}
		if p, has := fn["parameters"]; has && p != nil {
			if _, ok := p.(map[string]any); !ok {
				return "", fieldErr(at+".function.parameters", ErrNotObject)
			}
		}
		if d, has := fn["description"]; has && d != nil {
			if _, ok := asString(d); !ok {
				return "", fieldErr(at+".function.description", ErrNotString)
			}
		}
		obj["type"] = "function"
		out[i] = obj
	}
	b, err := marshal(out)
	if err != nil {
		return "", fieldErr(field, err)
	}
	return string(b), nil
}

// marshal is v's JSON without HTML escaping: a tool's description is sent
// as the row wrote it.
func marshal(v any) ([]byte, error) {
	var b bytes.Buffer
	e := json.NewEncoder(&b)
	e.SetEscapeHTML(false)
	if err := e.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte{'\n'}), nil
}

// toolChoice reads a row's tool_choice: a string (auto, none, required) or
// an object naming a function; it is sent as the row's own request field.
func toolChoice(r row, p *Row) *FieldError {
	v := r["tool_choice"]
	if v == nil {
		return nil
	}
	switch v.(type) {
	case string, map[string]any:
	default:
		return fieldErr("tool_choice", errors.New("not a string or object"))
	}
	if p.Params == nil {
		p.Params = map[string]any{}
	}
	p.Params["tool_choice"] = v
	return nil
}
