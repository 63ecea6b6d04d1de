package view

// A record's tools on its page: the target's calls of each turn, each
// with the results the row's tool turns gave it, the tools offered, and
// where the conversation left the row.

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"strconv"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// callView is one tool call as the record page shows it.
type callView struct {
	ID, Name string
	Args     string   // pretty-printed when valid JSON, else as sent
	Invalid  bool     // the arguments are not valid JSON: shown as sent
	Results  []string // the content of the tool turns answering it (tool_call_id)
}

// toolCallsOf is calls as the page shows them, each with the results in
// msgs that name its id.
func toolCallsOf(calls []chat.ToolCall, msgs []chat.Message) []callView {
	out := make([]callView, 0, len(calls))
	for _, c := range calls {
		v := callView{ID: c.ID, Name: c.Function.Name, Args: c.Function.Arguments}
		var b bytes.Buffer
		if json.Indent(&b, []byte(c.Function.Arguments), "", "  ") == nil {
			v.Args = b.String()
		} else {
			v.Invalid = true
		}
		for _, m := range msgs {
			if m.Role == "tool" && c.ID != "" && m.ToolCallID == c.ID {
				v.Results = append(v.Results, m.Content)
			}
		}
		out = append(out, v)
	}
	return out
}

// toolsView is a record's tools list: the names offered and the list
// pretty-printed, or as sent when it is not valid JSON.
type toolsView struct {
	Names []string
	Text  string
}

func toolsOf(tools string) toolsView {
	v := toolsView{Text: tools}
	var list []struct {
		Name     string `json:"name"`
		Function struct {
			Name string `json:"name"`
		} `json:"function"`
	}
	if json.Unmarshal([]byte(tools), &list) == nil {
		for _, t := range list {
			v.Names = append(v.Names, cmp.Or(t.Function.Name, t.Name))
		}
	}
	var b bytes.Buffer
	if json.Indent(&b, []byte(tools), "", "  ") == nil {
		v.Text = b.String()
	}
	return v
}

// divergenceText says in words how and where the target left the row's
// conversation (d.Turn indexes Record.Turns; the page counts from 1).
func divergenceText(d *sink.Divergence) string {
	turn := "turn " + strconv.Itoa(d.Turn+1)
	var s string
	switch d.Kind {
	case sink.DivergedMoreCalls:
		s = "At " + turn + " the target called a tool where the row had no result left to answer it with"
	case sink.DivergedParallelCalls:
		s = "At " + turn + " the target made several tool calls in one answer"
	case sink.DivergedUnknownTool:
		s = "At " + turn + " the target called a tool the row does not offer"
	case sink.DivergedAnswerForCall:
		s = "At " + turn + " the target answered in text where the row called a tool"
	default:
		s = fmt.Sprintf("At %s the target left the row's conversation (%s)", turn, d.Kind)
	}
	if d.Detail != "" {
		s += ": " + d.Detail
	}
	return s + ". The conversation ends there."
}

// hasToolCalls reports whether the target called a tool in rec, in its
// answer or in any turn.
func hasToolCalls(rec *sink.Record) bool {
	if len(rec.ToolCalls) > 0 {
		return true
	}
	for _, t := range rec.Turns {
		if len(t.ToolCalls) > 0 {
			return true
		}
	}
	return false
}
