package shape

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset/internal/number"
)

// The request a batch row may ask for: a chat completion, by POST. Other
// endpoints (embeddings, completions) are not what a chat job answers.
const (
	batchMethod = "POST"
	batchURL    = "/v1/chat/completions"
)

// batchRoles are the roles a batch row's messages may have. The body is a
// whole request, so its turns are sent as given, assistant and tool turns
// included; developer is OpenAI's newer name for system, which chat
// templates know.
var batchRoles = map[string]string{
	"system":    "system",
	"developer": "system",
	"user":      "user",
	"assistant": "assistant",
	"tool":      "tool",
}

// batchRequest reads one line of an OpenAI batch input file:
//
//	{"custom_id": "r1", "method": "POST", "url": "/v1/chat/completions",
//	 "body": {"model": "m", "messages": [...], "temperature": 0, ...}}
//
// It returns body.messages as the conversation and fills p.Params with the
// body's other request fields and p.Model with body.model. method and url
// may be left out (some providers' files do): they can only mean a chat
// completion by POST, and any other value is a bad row.
func batchRequest(r row, p *Row) ([]chat.Message, *FieldError) {
	if fe := batchConst(r, "method", batchMethod); fe != nil {
		return nil, fe
	}
	if fe := batchConst(r, "url", batchURL); fe != nil {
		return nil, fe
	}
	v, ok := r["body"]
	if !ok || v == nil {
		return nil, fieldErr("body", ErrMissing)
	}
	body, ok := v.(map[string]any)
	if !ok {
		return nil, fieldErr("body", ErrNotObject)
	}
	msgs, fe := batchMessages(body["messages"])
	if fe != nil {
		return nil, fe
	}
	if last := len(msgs) - 1; msgs[last].Role == "assistant" && body["continue_final_message"] != true {
		// Sent as given, the answer would be a second assistant turn
		// after the row's own: for training data, a turn that follows
		// nothing to answer.
		return nil, fieldErr(fmt.Sprintf("body.messages[%d].role", last), ErrEndsWithAnswer)
	}
	if fe := requestParams(body, "body", p); fe != nil {
		return nil, fe
	}
	return msgs, nil
}

// requestParams fills p.Params with a row's own request fields, the object
// at field at (a batch row's body, or the dataset.params_field column):
// every key but messages (the prompt), stream and stream_options (how the
// answer is read is generation.stream's to say), model (p.Model: the
// server serves one), n (samples come from generation.n: a row asks for
// one) and those that are null (the job's value applies). A known field
// with a value no server takes is a bad row (params.go).
func requestParams(obj map[string]any, at string, p *Row) *FieldError {
	var params map[string]any
	for k, v := range obj {
		switch k {
		case "messages":
		case "tools":
			// p.Tools: sent as the request's tools and kept on the record.
			t, fe := Tools(v, at+".tools")
			if fe != nil {
				return fe
			}
			if p.Tools == "" {
				p.Tools = t
			}
		case "stream", "stream_options":
			if v != nil {
				p.Ignored = append(p.Ignored, at+"."+k)
			}
		case "model":
			if v == nil {
				continue
			}
			m, ok := asString(v)
			if !ok {
				return fieldErr(at+".model", ErrNotString)
			}
			p.Model = m
		case "n":
			if v == nil {
				continue
			}
			if n, ok := number.Decimal(v); !ok || n != "1" {
				return fieldErr(at+".n", fmt.Errorf("%v: samples per prompt come from generation.n; a row asks for one", v))
			}
		default:
			if v == nil {
				// null is the field left out: the job's value applies
				// (sent as null, a server takes its own default, which
				// synthgen's bounds cannot know).
				continue
			}
			if err := checkParam(k, v); err != nil {
				return fieldErr(at+"."+k, err)
			}
			if params == nil {
				params = make(map[string]any, len(obj))
			}
			params[k] = v
		}
	}
	p.Params = params
	return nil
}

// batchConst checks a field that, when present, must have one value.
func batchConst(r row, key, want string) *FieldError {
	v, ok := r[key]
	if !ok || v == nil {
		return nil
	}
	if s, ok := asString(v); !ok || s != want {
		return fieldErr(key, fmt.Errorf("%s, want %s: only chat completions are asked", shown(v), strconv.Quote(want)))
	}
	return nil
}

// shown is a JSON value in a message: strings quoted, the rest as printed.
func shown(v any) string {
	if s, ok := asString(v); ok {
		return strconv.Quote(s)
	}
	return fmt.Sprint(v)
}

// batchMessages reads body.messages: every turn as given, with a role and
// text content (a string, or text parts joined with "\n"), an assistant
// turn's tool_calls (its content then possibly null) and a tool turn's
// tool_call_id. A turn carrying more (name, refusal) is a bad row: a record
// holds exactly the turns sent.
func batchMessages(v any) ([]chat.Message, *FieldError) {
	const list = "body.messages"
	items, fe := turnList(v, list)
	if fe != nil {
		return nil, fe
	}
	msgs := make([]chat.Message, 0, len(items))
	for i, it := range items {
		at := list + "[" + strconv.Itoa(i) + "]"
		turn, ok := it.(map[string]any)
		if !ok {
			return nil, fieldErr(at, ErrNotObject)
		}
		name, fe := stringField(turn, "role", at+".role")
		if fe != nil {
			return nil, fe
		}
		role, known := batchRoles[name]
		if !known {
			return nil, fieldErr(at+".role", fmt.Errorf("unknown role %q", name))
		}
		for k, v := range turn {
			sent := k == "role" || k == "content" || k == "tool_calls" && role == "assistant" || k == "tool_call_id" && role == "tool"
			if !sent && v != nil {
				return nil, fieldErr(at+"."+k, fmt.Errorf("not sent: a turn is sent as role, content, an assistant's tool_calls and a tool's tool_call_id only"))
			}
		}
		var m chat.Message
		if m.ToolCalls, fe = toolCalls(turn["tool_calls"], at+".tool_calls"); fe != nil {
			return nil, fe
		}
		if m.ToolCallID, fe = optionalString(turn, "tool_call_id", at+".tool_call_id"); fe != nil {
			return nil, fe
		}
		if turn["content"] != nil || len(m.ToolCalls) == 0 {
			if m.Content, fe = batchContent(turn["content"], at+".content"); fe != nil {
				return nil, fe
			}
		}
		m.Role = role
		msgs = append(msgs, m)
	}
	return msgs, nil
}

// batchContent is a turn's content: a string, or a list of text parts joined
// with "\n" as vLLM joins them; anything else (an image part, a number) is
// not text.
func batchContent(v any, field string) (string, *FieldError) {
	switch c := v.(type) {
	case nil:
		return "", fieldErr(field, ErrMissing)
	case string, []byte, []any:
		s, fe := contentOf(c, field, true)
		if fe != nil {
			rel := "content" + strings.TrimPrefix(fe.Field, field)
			return "", fieldErr(field, fmt.Errorf("%w: %s: %v", ErrNotText, rel, fe.Err))
		}
		return s, nil
	}
	return "", fieldErr(field, ErrNotText)
}
