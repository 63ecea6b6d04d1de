package view

// The records table's previews: a few words of each record's prompt and
// answer, so that a page of records can be skimmed without opening each.
// They are made from the records the page reads from the parts anyway
// (Index.Rows, for the rows shown), never kept in the index: its entries
// stay ~40 bytes a record.

import (
	"strings"
	"unicode/utf8"

	"github.com/synthgen/synthgen/sink"
)

// previewRunes bounds a preview: the cell shows what fits, its title
// (shown on hover) the rest.
const previewRunes = 300

// preview is s with its whitespace runs made one space, cut to n runes
// ("…" where cut).
func preview(s string, n int) string {
	var b strings.Builder
	runes := 0
	for _, w := range strings.Fields(s) {
		if b.Len() > 0 {
			b.WriteByte(' ')
			runes++
		}
		if runes+utf8.RuneCountInString(w) > n {
			for _, r := range w {
				if runes >= n {
					break
				}
				b.WriteRune(r)
				runes++
			}
			b.WriteString("…")
			return b.String()
		}
		b.WriteString(w)
		runes += utf8.RuneCountInString(w)
	}
	return b.String()
}

// promptPreview is the start of what the row asked: its last user
// message (the one answered), else its last message.
func promptPreview(r Row) string {
	if r.Record == nil {
		return ""
	}
	msgs := r.Record.Messages
	for i := len(msgs) - 1; i >= 0; i-- {
		if msgs[i].Role == "user" {
			return preview(msgs[i].Content, previewRunes)
		}
	}
	if len(msgs) > 0 {
		return preview(msgs[len(msgs)-1].Content, previewRunes)
	}
	return ""
}

// answerPreview is the start of the row's answer: its content (a whole
// conversation's last turn), its tool calls or else the reasoning when
// the content is empty, or a failed key's error.
func answerPreview(r Row) string {
	if r.Failed != nil {
		return preview(r.Failed.Cause+": "+r.Failed.Message, previewRunes)
	}
	if r.Record == nil {
		return ""
	}
	content, reasoning := answerOf(r.Record)
	if calls := r.Record.ToolCalls; strings.TrimSpace(content) == "" && len(calls) > 0 {
		var b strings.Builder
		for i, c := range calls {
			if i > 0 {
				b.WriteString("; ")
			}
			b.WriteString(c.Function.Name + "(" + c.Function.Arguments + ")")
		}
		return preview("(tool call) "+b.String(), previewRunes)
	}
	if strings.TrimSpace(content) == "" && reasoning != "" {
		return preview("(no content) reasoning: "+reasoning, previewRunes)
	}
	return preview(content, previewRunes)
}

// answerOf is the content and reasoning of rec's last answer.
func answerOf(rec *sink.Record) (content, reasoning string) {
	if n := len(rec.Turns); n > 0 && rec.Content == "" {
		return rec.Turns[n-1].Content, rec.Turns[n-1].Reasoning
	}
	return rec.Content, rec.Reasoning
}
