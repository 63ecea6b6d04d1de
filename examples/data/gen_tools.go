//go:build ignore

// gen_tools writes tools.jsonl: 60 rows in OpenAI's function-calling shape
// ({"id", "messages": [...], "tools": [...]}), as agentic datasets hold them:
// a user asks, the assistant calls a tool (tool_calls), the tool's result
// follows (a tool turn with tool_call_id), the assistant answers. Some rows
// call two tools in turn, some ask a second question after the answer. It
// is the sample for examples/tools.yaml (generation.turns: all), and it is
// deterministic: rerunning it rewrites the same file.
//
//	go run examples/data/gen_tools.go > examples/data/tools.jsonl
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

type call struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	} `json:"function"`
}

type message struct {
	Role       string  `json:"role"`
	Content    *string `json:"content"`
	ToolCalls  []call  `json:"tool_calls,omitempty"`
	ToolCallID string  `json:"tool_call_id,omitempty"`
}

type tool struct {
	Type     string         `json:"type"`
	Function map[string]any `json:"function"`
}

type row struct {
	ID       string    `json:"id"`
	Messages []message `json:"messages"`
	Tools    []tool    `json:"tools"`
}

func fn(name, desc string, params map[string]string) tool {
	props := map[string]any{}
	req := []string{}
	for p, t := range params {
		props[p] = map[string]string{"type": t}
		req = append(req, p)
	}
	sort.Strings(req)
	return tool{Type: "function", Function: map[string]any{"name": name, "description": desc,
		"parameters": map[string]any{"type": "object", "properties": props, "required": req}}}
}

var (
	weather  = fn("get_weather", "Current weather for a city", map[string]string{"city": "string"})
	flights  = fn("search_flights", "Flights between two airports on a date", map[string]string{"from": "string", "to": "string", "date": "string"})
	currency = fn("convert_currency", "Convert an amount between currencies", map[string]string{"amount": "number", "from": "string", "to": "string"})
	stock    = fn("get_stock_price", "Latest price of a stock ticker", map[string]string{"ticker": "string"})
)

var cities = []string{"Paris", "Tokyo", "Lagos", "Lima", "Oslo", "Hanoi", "Quito", "Perth", "Cairo", "Porto"}

func text(s string) *string { return &s }

func callOf(id, name, args string) message {
	c := call{ID: id, Type: "function"}
	c.Function.Name, c.Function.Arguments = name, args
	return message{Role: "assistant", Content: text(""), ToolCalls: []call{c}}
}

func main() {
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for i := range 60 {
		city, other := cities[i%len(cities)], cities[(i+3)%len(cities)]
		r := row{ID: fmt.Sprintf("tools-%02d", i)}
		switch i % 4 {
		case 0: // one question, one call
			r.Tools = []tool{weather, currency}
			r.Messages = []message{
				{Role: "user", Content: text(fmt.Sprintf("What's the weather in %s right now?", city))},
				callOf("call_0", "get_weather", fmt.Sprintf(`{"city": %q}`, city)),
				{Role: "tool", ToolCallID: "call_0", Content: text(fmt.Sprintf(`{"city": %q, "temp_c": %d, "sky": "clear"}`, city, 10+i%15))},
				{Role: "assistant", Content: text(fmt.Sprintf("It is %d °C and clear in %s.", 10+i%15, city))},
			}
		case 1: // two calls in turn
			r.Tools = []tool{flights, weather}
			r.Messages = []message{
				{Role: "system", Content: text("You are a travel assistant. Use the tools.")},
				{Role: "user", Content: text(fmt.Sprintf("Find me a flight from %s to %s on 2026-12-%02d, and tell me the weather there.", city, other, 1+i%28))},
				callOf("call_0", "search_flights", fmt.Sprintf(`{"from": %q, "to": %q, "date": "2026-12-%02d"}`, city, other, 1+i%28)),
				{Role: "tool", ToolCallID: "call_0", Content: text(fmt.Sprintf(`[{"flight": "SG%d", "departs": "08:%02d", "price_usd": %d}]`, 100+i, i%60, 200+7*i))},
				callOf("call_1", "get_weather", fmt.Sprintf(`{"city": %q}`, other)),
				{Role: "tool", ToolCallID: "call_1", Content: text(fmt.Sprintf(`{"city": %q, "temp_c": %d, "sky": "rain"}`, other, 5+i%20))},
				{Role: "assistant", Content: text(fmt.Sprintf("Flight SG%d leaves at 08:%02d; expect rain in %s.", 100+i, i%60, other))},
			}
		case 2: // a second question after the answer
			r.Tools = []tool{currency}
			r.Messages = []message{
				{Role: "user", Content: text(fmt.Sprintf("How much is %d USD in EUR?", 50+i))},
				callOf("call_0", "convert_currency", fmt.Sprintf(`{"amount": %d, "from": "USD", "to": "EUR"}`, 50+i)),
				{Role: "tool", ToolCallID: "call_0", Content: text(fmt.Sprintf(`{"result": %.2f}`, float64(50+i)*0.93))},
				{Role: "assistant", Content: text(fmt.Sprintf("%d USD is %.2f EUR.", 50+i, float64(50+i)*0.93))},
				{Role: "user", Content: text("And in JPY?")},
				callOf("call_1", "convert_currency", fmt.Sprintf(`{"amount": %d, "from": "USD", "to": "JPY"}`, 50+i)),
				{Role: "tool", ToolCallID: "call_1", Content: text(fmt.Sprintf(`{"result": %d}`, (50+i)*151))},
				{Role: "assistant", Content: text(fmt.Sprintf("%d USD is %d JPY.", 50+i, (50+i)*151))},
			}
		default: // a question the tools cannot answer: no call
			r.Tools = []tool{stock}
			r.Messages = []message{
				{Role: "user", Content: text(fmt.Sprintf("Write one sentence about %s.", city))},
				{Role: "assistant", Content: text(fmt.Sprintf("%s is a city worth a visit.", city))},
			}
		}
		if err := enc.Encode(r); err != nil {
			panic(err)
		}
	}
}
