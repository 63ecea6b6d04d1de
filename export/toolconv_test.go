package export

import (
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/sink"
)

// The tool conversations below are records as the engine writes them with
// generation.turns: all and tools: every target generation a Turn (its
// calls, its prompt and generated ids), Messages the last request (each
// earlier generation as an assistant turn, the row's cached result after
// each call), the divergent generation last.

const weatherTools = `[{"type":"function","function":{"name":"get_weather","parameters":{"type":"object","properties":{"city":{"type":"string"}}}}},` +
	`{"type":"function","function":{"name":"get_time","parameters":{"type":"object"}}}]`

func tcall(id, name, args string) chat.ToolCall {
	return chat.ToolCall{ID: id, Type: "function", Function: chat.ToolFunction{Name: name, Arguments: args}}
}

// gen is one target generation; results are the row's cached results
// spliced after its calls (none for the last generation).
type gen struct {
	content, reasoning string
	calls              []chat.ToolCall
	results            []string
}

// toolRecord is a whole conversation of gens answering "q <id>", its
// ids distinct: turn k generates 2+k ids 1000k+1, 1000k+2, ...
func toolRecord(id string, div *sink.Divergence, gens ...gen) *sink.Record {
	rec := &sink.Record{ID: id, Model: "qwen3-8b", Attempts: 1, Tools: weatherTools, Divergence: div,
		Messages: []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "q " + id}}}
	prompt := []int32{1, 2, 3}
	for k, g := range gens {
		ids := make([]int32, 2+k)
		for i := range ids {
			ids[i] = int32(1000*(k+1) + i + 1)
		}
		finish := "stop"
		if len(g.calls) > 0 {
			finish = "tool_calls"
		}
		rec.Turns = append(rec.Turns, sink.Turn{Content: g.content, Reasoning: g.reasoning, FinishReason: finish,
			PromptTokens: len(prompt), CompletionTokens: len(ids), PromptTokenIDs: slices.Clone(prompt), TokenIDs: ids, ToolCalls: g.calls})
		if k == len(gens)-1 {
			rec.Content, rec.Reasoning, rec.FinishReason, rec.ToolCalls = g.content, g.reasoning, finish, g.calls
			rec.PromptTokenIDs, rec.TokenIDs = slices.Clone(prompt), ids
			break
		}
		rec.Messages = append(rec.Messages, chat.Message{Role: "assistant", Content: g.content, ToolCalls: g.calls})
		prompt = append(append(prompt, ids...), 7, 8)
		for i, c := range g.calls {
			rec.Messages = append(rec.Messages, chat.Message{Role: "tool", Content: g.results[i], ToolCallID: c.ID})
			prompt = append(prompt, int32(500+i))
		}
	}
	return rec
}

// toolRecords are, by id: a conversation followed to its end (two calls,
// each answered by its cached result, then the answer), one of each kind
// of divergence, one whose call's arguments are not JSON, and one whose
// call has text beside it.
func toolRecords() map[string]*sink.Record {
	paris := tcall("call_0", "get_weather", `{"city": "Paris"}`)
	clock := tcall("call_1", "get_time", `{}`)
	answered := gen{content: "", reasoning: "Weather first.", calls: []chat.ToolCall{paris}, results: []string{`{"sky": "clear"}`}}
	return map[string]*sink.Record{
		"t": toolRecord("t", nil, answered,
			gen{reasoning: "Now the time.", calls: []chat.ToolCall{clock}, results: []string{"12:00"}},
			gen{content: "Clear sky at noon.", reasoning: "Both known."}),
		"p": toolRecord("p", &sink.Divergence{Kind: sink.DivergedParallelCalls, Turn: 0, Detail: "2 calls"},
			gen{calls: []chat.ToolCall{paris, clock}}),
		"m": toolRecord("m", &sink.Divergence{Kind: sink.DivergedMoreCalls, Turn: 1},
			answered, gen{calls: []chat.ToolCall{clock}}),
		"u": toolRecord("u", &sink.Divergence{Kind: sink.DivergedUnknownTool, Turn: 1, Detail: "get_news"},
			answered, gen{calls: []chat.ToolCall{tcall("call_9", "get_news", `{"q": "x"}`)}}),
		"a": toolRecord("a", &sink.Divergence{Kind: sink.DivergedAnswerForCall, Turn: 1},
			answered, gen{content: "I think it is noon."}),
		"x": toolRecord("x", nil, gen{calls: []chat.ToolCall{tcall("call_0", "get_weather", `{"city": "Par`)}, results: []string{"?"}},
			gen{content: "Unknown."}),
		"s": toolRecord("s", nil, gen{content: "Let me look.", calls: []chat.ToolCall{paris}, results: []string{"sun"}},
			gen{content: "Sunny."}),
	}
}

// toolDir writes toolRecords (sample 0 each) to an output directory.
func toolDir(t *testing.T, format string) (string, map[string]*sink.Record) {
	t.Helper()
	recs := toolRecords()
	return writeDir(t, format, 3, slices.Collect(maps.Values(recs))...), recs
}

// jsonLines are a JSONL file's lines as generic JSON, as Python's
// json.loads reads them: the field names are the file's, not this
// package's struct tags.
func jsonLines(t *testing.T, path string) []map[string]any {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var out []map[string]any
	for _, line := range bytes.Split(bytes.TrimSpace(b), []byte("\n")) {
		var m map[string]any
		if err := json.Unmarshal(line, &m); err != nil {
			t.Fatalf("%s: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func ints(v any) []int32 {
	var out []int32
	for _, x := range v.([]any) {
		out = append(out, int32(x.(float64)))
	}
	return out
}

// TestSpeculatorsToolRows: one row per target generation, read as
// speculators' training reads them (input_ids and loss_mask of one length,
// some supervision); id <primary_id>_s0_gen<k>; is_tool_call on the call
// rows; the loss mask exactly over the generation's own ids (the call's
// tokens for a call row); the row's conversation the history before the
// generation (cached results after their calls) and the generation with
// its calls; a divergent conversation's rows up to and with the divergent
// generation, as the script commits it before it truncates; the summary
// and the card count the calls and the divergent conversations. Parquet shards export
// the same rows.
func TestSpeculatorsToolRows(t *testing.T) {
	for _, shards := range []string{sink.FormatJSONL, sink.FormatParquet} {
		dir, recs := toolDir(t, shards)
		out := filepath.Join(t.TempDir(), "spec.jsonl")
		o := options(t, FormatSpeculators, out, dir)
		sum := run(t, o)
		if card := Card(o, sum); !strings.Contains(card, "Each row is one generation of the model") || !strings.Contains(card, "hold 11 tool calls") ||
			!strings.Contains(card, "4 conversations left the dataset's") {
			t.Errorf("%s: the card does not say what a row is, or the calls and divergences:\n%s", shards, card)
		}
		rows := jsonLines(t, out)
		byRec := map[string][]map[string]any{}
		for _, row := range rows {
			byRec[row["primary_id"].(string)] = append(byRec[row["primary_id"].(string)], row)
		}
		total := 0
		for id, rec := range recs {
			total += len(rec.Turns)
			got := byRec[id]
			if len(got) != len(rec.Turns) {
				t.Fatalf("%s: record %s: %d rows, want one per generation (%d)", shards, id, len(got), len(rec.Turns))
			}
			for k, row := range got {
				turn := rec.Turns[k]
				what := fmt.Sprintf("%s: row %v", shards, row["id"])
				if row["id"] != fmt.Sprintf("%s_s0_gen%d", id, k) {
					t.Errorf("%s: want id %s_s0_gen%d", what, id, k)
				}
				in, mask := ints(row["input_ids"]), ints(row["loss_mask"])
				if len(in) != len(mask) {
					t.Fatalf("%s: input_ids %d, loss_mask %d: speculators refuses the row", what, len(in), len(mask))
				}
				var supervised []int32
				for i, m := range mask {
					if m == 1 {
						supervised = append(supervised, in[i])
					}
				}
				if !slices.Equal(supervised, turn.TokenIDs) || !slices.Equal(in[:len(in)-len(turn.TokenIDs)], turn.PromptTokenIDs) {
					t.Errorf("%s: loss mask over %v of %v, want exactly the generation's ids %v after its prompt %v", what, supervised, in, turn.TokenIDs, turn.PromptTokenIDs)
				}
				meta := row["metadata"].(map[string]any)
				if meta["is_tool_call"] != (len(turn.ToolCalls) > 0) || meta["finish_reason"] != turn.FinishReason {
					t.Errorf("%s: metadata %v, want is_tool_call %v", what, meta, len(turn.ToolCalls) > 0)
				}
				checkRowConversation(t, what, row["conversations"].([]any), rec, k)
			}
		}
		var text strings.Builder
		sum.WriteText(&text, 1)
		if sum.ToolCalls != 11 || sum.Diverged != 4 || !strings.Contains(text.String(), "tools    11 calls; 4 conversations left the row's conversation") {
			t.Errorf("%s: summary counts %d calls, %d diverged, want 11 and 4:\n%s", shards, sum.ToolCalls, sum.Diverged, text.String())
		}
		if len(rows) != total || sum.Exported != int64(total) {
			t.Errorf("%s: %d rows (%d exported), want %d for %d records", shards, len(rows), sum.Exported, total, len(recs))
		}
	}
}

// checkRowConversation: generation k's conversation is the record's
// conversation up to that generation's assistant turn, which carries the
// generation's calls as sent; each tool turn answers the call before it.
func checkRowConversation(t *testing.T, what string, conv []any, rec *sink.Record, k int) {
	t.Helper()
	assistants, calls := 0, map[string]bool{}
	for i, raw := range conv {
		m := raw.(map[string]any)
		switch m["role"] {
		case "assistant":
			assistants++
			tcs, _ := m["tool_calls"].([]any)
			if i == len(conv)-1 {
				var got []chat.ToolCall
				b, _ := json.Marshal(tcs)
				if err := json.Unmarshal(b, &got); err != nil || !reflect.DeepEqual(got, rec.Turns[k].ToolCalls) {
					t.Errorf("%s: the generation's calls %s (%v), want %+v", what, b, err, rec.Turns[k].ToolCalls)
				}
			}
			for _, tc := range tcs {
				calls[tc.(map[string]any)["id"].(string)] = true
			}
		case "tool":
			if !calls[m["tool_call_id"].(string)] {
				t.Errorf("%s: turn %d answers no call: %v", what, i, m)
			}
		}
	}
	if assistants != k+1 || conv[len(conv)-1].(map[string]any)["role"] != "assistant" {
		t.Errorf("%s: conversation of %d assistant turns, want %d ending with the generation: %v", what, assistants, k+1, conv)
	}
}

// llamaFactoryShareGPT reads a sharegpt line as LLaMA-Factory's
// SharegptDatasetConverter and FunctionFormatter do: the system turn
// first, then human or observation at even places and gpt or
// function_call at odd ones, an even count; a function_call value (after
// the thought words, with no tool-call words in it) JSON, an object or a
// list of objects, each with a name and arguments that it dumps again. It returns the roles and the
// calls, or why the row would be skipped or fail.
var (
	thoughtWords  = regexp.MustCompile(`(?s)<think>\n(.*?)\n</think>\n\n`) // LLaMA-Factory's default thought_words
	toolCallWords = regexp.MustCompile(`(?s)<tool_call>(.*?)</tool_call>`) // and tool_call_words
)

func llamaFactoryShareGPT(row map[string]any) (roles []string, calls [][]map[string]any, err error) {
	msgs := row["conversations"].([]any)
	if len(msgs) > 0 && msgs[0].(map[string]any)["from"] == "system" {
		msgs = msgs[1:]
	}
	accept := [][]string{{"human", "observation"}, {"gpt", "function_call"}}
	for i, raw := range msgs {
		m := raw.(map[string]any)
		from, value := m["from"].(string), m["value"].(string)
		if !slices.Contains(accept[i%2], from) {
			return nil, nil, fmt.Errorf("turn %d: invalid role tag %q", i, from)
		}
		roles = append(roles, from)
		if from != "function_call" {
			continue
		}
		if toolCallWords.MatchString(value) {
			return nil, nil, fmt.Errorf("turn %d: <tool_call>...</tool_call> in %q: its JSON alone would be read as the call", i, value)
		}
		if thought := thoughtWords.FindString(value); thought != "" {
			value = strings.ReplaceAll(value, thought, "")
		}
		var one map[string]any
		var many []map[string]any
		if json.Unmarshal([]byte(value), &many) != nil {
			if err := json.Unmarshal([]byte(value), &one); err != nil {
				return nil, nil, fmt.Errorf("turn %d: invalid JSON format in function message %q", i, value)
			}
			many = []map[string]any{one}
		}
		for _, c := range many {
			if _, ok := c["name"].(string); !ok || c["arguments"] == nil {
				return nil, nil, fmt.Errorf("turn %d: a call without name or arguments: %v", i, c)
			}
		}
		calls = append(calls, many)
	}
	if len(msgs)%2 != 0 {
		return nil, nil, fmt.Errorf("invalid message count %d", len(msgs))
	}
	return roles, calls, nil
}

// TestShareGPTToolConversations: every row LLaMA-Factory's reader takes,
// its calls function_call turns (the arguments the JSON object the model
// sent, a list for parallel calls), the cached results observation turns,
// the tools a JSON text column; inline reasoning before a call's JSON is
// read as its thought; a call whose arguments are not JSON, and text
// beside a call, are dropped by the sharegpt filter and counted.
func TestShareGPTToolConversations(t *testing.T) {
	t.Parallel()
	dir, _ := toolDir(t, sink.FormatJSONL)
	for _, mode := range ReasoningModes {
		out := filepath.Join(t.TempDir(), "sg.jsonl")
		o := options(t, FormatShareGPT, out, dir)
		o.Reasoning = mode
		sum := run(t, o)
		if f := sum.Filters[len(sum.Filters)-1]; f.Name != FilterShareGPT || f.Dropped != 2 {
			t.Errorf("%s: filters %+v, want the sharegpt filter dropping x and s", mode, sum.Filters)
		}
		got := map[string][]string{}
		for _, row := range jsonLines(t, out) {
			roles, calls, err := llamaFactoryShareGPT(row)
			if err != nil {
				t.Fatalf("%s: row %v: %v", mode, row["id"], err)
			}
			var tools []any
			if err := json.Unmarshal([]byte(row["tools"].(string)), &tools); err != nil || len(tools) != 2 {
				t.Errorf("%s: tools %v: %v", mode, row["tools"], err)
			}
			got[row["id"].(string)] = roles
			switch row["id"] {
			case "t":
				want := []map[string]any{{"name": "get_weather", "arguments": map[string]any{"city": "Paris"}}}
				if !reflect.DeepEqual(calls[0], want) {
					t.Errorf("%s: t's first call %v, want %v", mode, calls[0], want)
				}
				obs := row["conversations"].([]any)[3].(map[string]any)
				if obs["value"] != `{"sky": "clear"}` {
					t.Errorf("%s: t's observation %v, want the cached result", mode, obs)
				}
			case "p":
				if len(calls) != 1 || len(calls[0]) != 2 {
					t.Errorf("%s: p's calls %v, want one turn of two parallel calls", mode, calls)
				}
			}
		}
		want := map[string][]string{
			"t": {"human", "function_call", "observation", "function_call", "observation", "gpt"},
			"p": {"human", "function_call"},
			"m": {"human", "function_call", "observation", "function_call"},
			"u": {"human", "function_call", "observation", "function_call"},
			"a": {"human", "function_call", "observation", "gpt"},
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s: rows\n%v\nwant\n%v", mode, got, want)
		}
	}
}

// parseSpecForge reads a specforge line as SpecForge's loader does
// (specforge/utils.py safe_conversations_generator, then
// specforge/data/parse.py): the tools JSON text parsed to a list, each
// call's arguments parsed from their text to an object (a failure is the
// loader's silent {}, an error here), and the turn order its parser keeps
// (a tool turn after an assistant or tool turn, an assistant turn after a
// user or tool turn).
func parseSpecForge(row map[string]any) (roles []string, err error) {
	var tools []any
	if s, _ := row["tools"].(string); json.Unmarshal([]byte(s), &tools) != nil || len(tools) == 0 {
		return nil, fmt.Errorf("tools %v: not a JSON list", row["tools"])
	}
	conv := row["conversations"].([]any)
	for j, raw := range conv {
		m := raw.(map[string]any)
		role := m["role"].(string)
		if j > 0 {
			prev := conv[j-1].(map[string]any)["role"]
			if role == "tool" && prev != "assistant" && prev != "tool" || role == "assistant" && prev != "user" && prev != "tool" {
				return nil, fmt.Errorf("message %d: %s after %s: the parser truncates there", j, role, prev)
			}
		}
		for _, tc := range asList(m["tool_calls"]) {
			fn := tc.(map[string]any)["function"].(map[string]any)
			var args map[string]any
			if err := json.Unmarshal([]byte(fn["arguments"].(string)), &args); err != nil {
				return nil, fmt.Errorf("message %d: arguments %q: the loader replaces them with {}", j, fn["arguments"])
			}
		}
		if role == "tool" && m["tool_call_id"] == nil {
			return nil, fmt.Errorf("message %d: a tool turn without tool_call_id", j)
		}
		roles = append(roles, role)
	}
	return roles, nil
}

func asList(v any) []any { l, _ := v.([]any); return l }

// TestSpecForgeToolConversations: every row SpecForge's loader reads
// whole, with its tools, the calls on the assistant turns and the cached
// results as tool turns with their call ids, reasoning beside a call as
// the thinking parser reads it; the row whose arguments are not JSON is
// dropped by the specforge filter (text beside a call is SpecForge's
// convention, kept).
func TestSpecForgeToolConversations(t *testing.T) {
	t.Parallel()
	dir, _ := toolDir(t, sink.FormatJSONL)
	out := filepath.Join(t.TempDir(), "sf.jsonl")
	sum := run(t, options(t, FormatSpecForge, out, dir))
	if f := sum.Filters[len(sum.Filters)-1]; f.Name != FilterSpecForge || f.Dropped != 1 {
		t.Errorf("filters %+v, want the specforge filter dropping x", sum.Filters)
	}
	got := map[string]int{}
	for _, row := range jsonLines(t, out) {
		roles, err := parseSpecForge(row)
		if err != nil {
			t.Fatalf("row %v: %v", row["id"], err)
		}
		got[row["id"].(string)] = len(roles)
		if row["id"] == "t" {
			call := row["conversations"].([]any)[2].(map[string]any)
			if call["reasoning_content"] != "Weather first." || call["content"] != "" || len(asList(call["tool_calls"])) != 1 {
				t.Errorf("t's call turn %v", call)
			}
		}
	}
	if want := map[string]int{"t": 7, "p": 3, "m": 5, "u": 5, "a": 5, "s": 5}; !reflect.DeepEqual(got, want) {
		t.Errorf("rows (turns) %v, want %v", got, want)
	}
}

// FuzzToolCallTurns: whatever a server sends as a call's arguments,
// reasoning and content beside it, the sharegpt and specforge rows encode,
// and a row their filter keeps reads back, as LLaMA-Factory and
// SpecForge read it, with the arguments the server sent.
func FuzzToolCallTurns(f *testing.F) {
	f.Add(`{"city": "Paris"}`, "", "Weather first.")
	f.Add(`{"a": 1`, "", "")
	f.Add(`{"q": "<think>\n</think>\n\n<tool_call>"}`, " ", "x\n</think>\n\ny")
	f.Add(`null`, "Let me look.", "")
	f.Fuzz(func(t *testing.T, args, content, reasoning string) {
		rec := toolRecord("f", nil, gen{content: content, reasoning: reasoning, calls: []chat.ToolCall{tcall("c", "get_weather", args)}, results: []string{"r"}},
			gen{content: "done"})
		var want any
		wantErr := json.Unmarshal([]byte(args), &want)
		for _, mode := range ReasoningModes {
			row, err := json.Marshal(sharegptOf(rec, mode))
			if err != nil {
				t.Fatalf("sharegpt row: %v", err)
			}
			var m map[string]any
			if err := json.Unmarshal(row, &m); err != nil {
				t.Fatalf("sharegpt row %s: %v", row, err)
			}
			if sharegptRefusal(Conversation(rec), mode) == "" {
				_, calls, err := llamaFactoryShareGPT(m)
				if err != nil || wantErr != nil || !reflect.DeepEqual(calls[0][0]["arguments"], want) {
					t.Fatalf("%s: kept row %s read as %v, %v; want the arguments %q", mode, row, calls, err, args)
				}
			}
			if sf := specforgeOf(rec, mode); specforgeRefusal(sf) == "" {
				row, _ = json.Marshal(sf)
				m = nil
				if err := json.Unmarshal(row, &m); err != nil {
					t.Fatal(err)
				}
				if _, err := parseSpecForge(m); err != nil || wantErr != nil {
					t.Fatalf("%s: kept specforge row %s: %v", mode, row, err)
				}
			}
		}
	})
}
