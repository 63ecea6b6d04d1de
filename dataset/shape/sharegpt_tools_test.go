package shape

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
)

// FuzzShareGPTToolTurns: a ShareGPT row of untrusted function_call and
// observation turns never panics; read or bad, it is read the same way
// twice; read, every call has an id (unique in the row, where the row names
// none of its own) and a name, every tool turn answers a call of the
// assistant turns before it, and the
// prompt (turns: first) holds no assistant turn.
func FuzzShareGPTToolTurns(f *testing.F) {
	f.Add([]byte(`{"conversations":[{"from":"human","value":"Q"},{"from":"function_call","value":"{\"name\":\"f\",\"arguments\":{\"x\":1}}"},{"from":"observation","value":"r"},{"from":"gpt","value":"A"}],"tools":"[{\"name\":\"f\"}]"}`))
	f.Add([]byte(`{"conversations":[{"from":"human","value":"Q"},{"from":"function_call","value":"[{\"name\":\"a\",\"arguments\":\"{}\"},{\"name\":\"b\",\"arguments\":{}}]"},{"from":"observation","value":"1"},{"from":"observation","value":"2"}]}`))
	f.Add([]byte(`{"conversations":[{"role":"user","content":"Q"},{"role":"function_call","content":"{\"name\":\"f\"}"},{"role":"observation","content":"r"}]}`))
	f.Add([]byte(`{"conversations":[{"from":"human","value":"Q"},{"from":"observation","value":"r"}]}`))
	f.Add([]byte(`{"conversations":[{"from":"human","value":"Q"},{"from":"function_call","value":"{\"name\":\"f\",\"arguments\":{}} x"},{"from":"observation"}]}`))
	f.Add([]byte(`{"conversations":[{"from":"human","value":"Q"},{"from":"function_call","value":"{\"name\":\"f\",\"arguments\":{}}"},{"from":"tool","value":"r"},{"from":"tool","tool_call_id":"x","value":"r"}]}`))
	f.Add([]byte(`{"conversations":[{"from":"system","value":"<tools>[]</tools>"},{"from":"human","value":"Q"},{"from":"gpt","value":"<tool_call>{}</tool_call>"},{"from":"tool","value":"r"},{"from":"gpt","value":"A"}]}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		d := json.NewDecoder(bytes.NewReader(data))
		d.UseNumber()
		var r map[string]any
		if d.Decode(&r) != nil || r == nil {
			return
		}
		c := &Converter{Format: FormatShareGPT}
		var p, again Row
		fe, fe2 := c.Convert(r, &p), c.Convert(r, &again)
		if !reflect.DeepEqual(fe, fe2) || !reflect.DeepEqual(p, again) {
			t.Fatalf("read twice, two answers: %v %+v / %v %+v", fe, p, fe2, again)
		}
		if fe == nil {
			for _, m := range p.Messages {
				if m.Role == "assistant" {
					t.Fatalf("the prompt holds an assistant turn: %+v", p.Messages)
				}
			}
		}
		conv, fe := c.Conversation(r)
		conv2, fe2 := c.Conversation(r)
		if !reflect.DeepEqual(fe, fe2) || !reflect.DeepEqual(conv, conv2) {
			t.Fatalf("conversation read twice, two answers")
		}
		if fe != nil {
			if fe.Field != "" && !strings.HasPrefix(fe.Field, "conversations") && !strings.HasPrefix(fe.Field, "tools") {
				t.Fatalf("bad row names field %q, not the row's", fe.Field)
			}
			return
		}
		if ownIDs(r) {
			return // the row's own ids are its own to repeat or dangle
		}
		ids := map[string]bool{}
		for i, m := range conv {
			for _, tc := range m.ToolCalls {
				if tc.Function.Name == "" || (tc.ID != "" && ids[tc.ID]) {
					t.Fatalf("turn %d: call without a name or with a repeated id: %+v", i, conv)
				}
				ids[tc.ID] = true
			}
			if m.Role == "tool" && m.ToolCallID != "" && !ids[m.ToolCallID] {
				t.Fatalf("turn %d answers %q, a call not made before it: %+v", i, m.ToolCallID, conv)
			}
		}
	})
}

// ownIDs: some turn of r's conversations names a call id of its own.
func ownIDs(r map[string]any) bool {
	items, _ := r["conversations"].([]any)
	for _, it := range items {
		turn, _ := it.(map[string]any)
		if turn["tool_call_id"] != nil || turn["tool_calls"] != nil {
			return true
		}
	}
	return false
}
