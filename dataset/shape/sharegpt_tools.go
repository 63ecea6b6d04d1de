package shape

// ShareGPT's function-calling turns, LLaMA-Factory's convention (its
// glaive_toolcall data and the datasets converted to it): a
// `from: function_call` turn whose value is the JSON text of a call
// ({"name", "arguments"}) or of a list of them (parallel calls), and a
// `from: observation` turn holding a call's result (or a `tool` turn after
// a function_call, as some conversions tag it). They are read as
// OpenAI's turns: an assistant turn with tool_calls, and a tool turn with
// the tool_call_id of the call it answers. A function_call carries no id,
// so each call gets one from its place: call_<turn index>, or
// call_<turn index>_<k> for the k-th of a list.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// ErrNoCall: an observation with no function_call before it to answer.
var ErrNoCall = errors.New("an observation with no function_call before it to answer")

// functionTurns is items with their function_call and observation turns
// rewritten into OpenAI's shape (the list itself is left alone: a row
// without such turns is returned as it is). roleKey is the list's role key
// ("from" or "role"); a turn using the other is read by it, as turns does.
// A turn that is not an object, or whose role is not a string, is left for
// turns to report.
func functionTurns(items []any, list, roleKey string) ([]any, *FieldError) {
	var (
		out     []any
		pending []string // the last function_call's ids not yet answered
		calls   int      // how many calls it made
	)
	for i, it := range items {
		turn, _ := it.(map[string]any)
		rk := roleKey
		if _, has := turn[rk]; !has {
			rk = altRoleKey(rk)
		}
		name, _ := asString(turn[rk])
		at := list + "[" + strconv.Itoa(i) + "]"
		var rewritten map[string]any
		switch strings.ToLower(name) {
		case "function_call":
			ck := contentKeyOf(rk)
			s, fe := stringField(turn, ck, at+"."+ck)
			if fe != nil {
				return nil, fe
			}
			tc, ids, fe := functionCall(s, at+"."+ck, i)
			if fe != nil {
				return nil, fe
			}
			pending, calls = ids, len(ids)
			rewritten = map[string]any{rk: "assistant", "tool_calls": tc}
		case "tool":
			// A tool turn after a function_call (LLaMA-Factory's
			// observation_tag set to "tool") answers it as an observation
			// does; elsewhere, or naming its own call, it is left as it is.
			if len(pending) == 0 || turn["tool_call_id"] != nil {
				if out != nil {
					out = append(out, it)
				}
				continue
			}
			fallthrough
		case "observation":
			if len(pending) == 0 {
				if calls > 0 {
					return nil, fieldErr(at+"."+rk, fmt.Errorf("%w: the function_call before it made %d calls, each answered already", ErrNoCall, calls))
				}
				return nil, fieldErr(at+"."+rk, ErrNoCall)
			}
			ck := contentKeyOf(rk)
			rewritten = map[string]any{rk: "tool", ck: turn[ck], "tool_call_id": pending[0]}
			pending = pending[1:]
		default:
			// Any other turn ends the call's results: an observation after
			// it answers nothing.
			pending, calls = nil, 0
			if out != nil {
				out = append(out, it)
			}
			continue
		}
		if out == nil {
			out = append(make([]any, 0, len(items)), items[:i]...)
		}
		out = append(out, rewritten)
	}
	if out == nil {
		return items, nil
	}
	return out, nil
}

// contentKeyOf is the content key that goes with role key rk.
func contentKeyOf(rk string) string {
	if rk == "role" {
		return "content"
	}
	return "value"
}

// functionCall reads a function_call turn's value s (at field at, turn
// index turn): JSON of {"name", "arguments"} or a non-empty list of them,
// as tool_calls and their ids. Arguments are kept as the row wrote them: an
// object's JSON text as written, a string's content.
func functionCall(s, at string, turn int) ([]any, []string, *FieldError) {
	var v json.RawMessage // checked whole: nothing may follow the value
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, nil, fieldErr(at, fmt.Errorf("%w: %v", ErrNotJSON, err))
	}
	var items []json.RawMessage
	single := firstByte(v) == '{'
	switch {
	case single:
		items = []json.RawMessage{v}
	case firstByte(v) == '[':
		if err := json.Unmarshal(v, &items); err != nil {
			return nil, nil, fieldErr(at, err)
		}
		if len(items) == 0 {
			return nil, nil, fieldErr(at, ErrEmpty)
		}
	default:
		return nil, nil, fieldErr(at, errors.New(`not a call: want {"name", "arguments"} or a list of them`))
	}
	calls, ids := make([]any, len(items)), make([]string, len(items))
	for k, raw := range items {
		here, id := at, "call_"+strconv.Itoa(turn)
		if !single {
			here, id = at+"["+strconv.Itoa(k)+"]", id+"_"+strconv.Itoa(k)
		}
		var obj map[string]json.RawMessage
		if firstByte(raw) != '{' || json.Unmarshal(raw, &obj) != nil {
			return nil, nil, fieldErr(here, ErrNotObject)
		}
		var name string
		if n := obj["name"]; n == nil || string(n) == "null" {
			return nil, nil, fieldErr(here+".name", ErrMissing)
		} else if json.Unmarshal(n, &name) != nil {
			return nil, nil, fieldErr(here+".name", ErrNotString)
		}
		if name == "" {
			return nil, nil, fieldErr(here+".name", ErrEmpty)
		}
		args, fe := rawArguments(obj["arguments"], here+".arguments")
		if fe != nil {
			return nil, nil, fe
		}
		ids[k] = id
		calls[k] = map[string]any{"id": id, "type": "function", "function": map[string]any{"name": name, "arguments": args}}
	}
	return calls, ids, nil
}

// rawArguments is a call's arguments as JSON text: an object as written,
// a string's content (the JSON text a model wrote, valid or not).
func rawArguments(raw json.RawMessage, at string) (string, *FieldError) {
	switch firstByte(raw) {
	case 0, 'n':
		return "", fieldErr(at, ErrMissing)
	case '{':
		return string(bytes.TrimSpace(raw)), nil
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return "", fieldErr(at, err)
		}
		return s, nil
	}
	return "", fieldErr(at, errors.New("not a string or object"))
}

// firstByte is the first byte of a JSON value past white space, 0 for none.
func firstByte(v []byte) byte {
	if t := bytes.TrimLeft(v, " \t\r\n"); len(t) > 0 {
		return t[0]
	}
	return 0
}
