package mockserver

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net/http"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/synthgen/synthgen/mockserver/tokenids"
)

// tokenAnswer is what an answer says of its tokens.
type tokenAnswer struct {
	text       string // reasoning + content
	prompt     []int32
	ids        []int32
	completion int // usage
	promptN    int // usage
	sawIDs     bool
	// per token: its logprob and its alternatives' names and logprobs
	logprobs []float32
	altNames [][]string
	altLPs   [][]float32
}

// alternativeJSON and entryJSON are logprobs.content's shapes.
type alternativeJSON struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
}

type entryJSON struct {
	Token       string            `json:"token"`
	Logprob     float32           `json:"logprob"`
	Bytes       []int             `json:"bytes"`
	TopLogprobs []alternativeJSON `json:"top_logprobs"`
}

type choiceJSON struct {
	Delta, Message *struct {
		Content, Reasoning string
	}
	Logprobs *struct {
		Content []entryJSON `json:"content"`
	} `json:"logprobs"`
	TokenIDs *[]int32 `json:"token_ids"`
}

type bodyJSON struct {
	Choices        []choiceJSON `json:"choices"`
	PromptTokenIDs *[]int32     `json:"prompt_token_ids"`
	Usage          *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
	} `json:"usage"`
}

func (a *tokenAnswer) take(t *testing.T, b *bodyJSON) {
	t.Helper()
	if b.PromptTokenIDs != nil {
		if a.prompt != nil {
			t.Fatal("prompt_token_ids twice")
		}
		a.prompt, a.sawIDs = *b.PromptTokenIDs, true
	}
	if b.Usage != nil {
		a.promptN, a.completion = b.Usage.PromptTokens, b.Usage.CompletionTokens
	}
	for _, c := range b.Choices {
		if c.TokenIDs != nil {
			a.ids, a.sawIDs = append(a.ids, *c.TokenIDs...), true
		}
		for _, text := range []*struct{ Content, Reasoning string }{c.Delta, c.Message} {
			if text != nil {
				a.text += text.Reasoning + text.Content
			}
		}
		if c.Logprobs == nil {
			continue
		}
		for _, e := range c.Logprobs.Content {
			a.logprobs = append(a.logprobs, e.Logprob)
			var names []string
			var lps []float32
			for _, alt := range e.TopLogprobs {
				names, lps = append(names, alt.Token), append(lps, alt.Logprob)
			}
			if len(e.Bytes) != len(e.Token) && !strings.HasPrefix(e.Token, "token_id:") {
				t.Errorf("entry %q has %d bytes", e.Token, len(e.Bytes))
			}
			a.altNames, a.altLPs = append(a.altNames, names), append(a.altLPs, lps)
		}
	}
}

// spell is the text ids spell, each a token the mock generates.
func spell(t *testing.T, what string, ids []int32) string {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		p, ok := tokenids.Text(id)
		if !ok {
			t.Fatalf("%s: id %d is none the mock generates", what, id)
		}
		b.WriteString(p)
	}
	return b.String()
}

// askTokens sends body (streamed or plain) and reads its tokens.
func askTokens(t *testing.T, url string, body map[string]any, streamed bool) tokenAnswer {
	t.Helper()
	body = maps.Clone(body)
	if streamed {
		body["stream"], body["stream_options"] = true, map[string]any{"include_usage": true}
	}
	resp := post(t, context.Background(), url, body)
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	var a tokenAnswer
	if !streamed {
		var b bodyJSON
		if err := json.NewDecoder(resp.Body).Decode(&b); err != nil {
			t.Fatal(err)
		}
		a.take(t, &b)
		return a
	}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	first := true
	for sc.Scan() {
		data, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var b bodyJSON
		if err := json.Unmarshal([]byte(data), &b); err != nil {
			t.Fatalf("chunk %s: %v", data, err)
		}
		if !first && b.PromptTokenIDs != nil {
			t.Errorf("prompt_token_ids on a chunk after the first: %s", data)
		}
		first = false
		a.take(t, &b)
	}
	return a
}

func tokenBody(text string, k int, byID bool) map[string]any {
	body := map[string]any{"messages": userMessages(text), "max_tokens": 200, "return_token_ids": true}
	if k > 0 {
		body["logprobs"], body["top_logprobs"] = true, k
		if byID {
			body["return_tokens_as_token_ids"] = true
		}
	}
	return body
}

// TestTokenIDs: asked for ids, the mock answers the prompt's (one a word
// of the messages, as many as usage.prompt_tokens) and the answer's (as
// many as usage.completion_tokens, spelling its text), the same streamed
// and plain and on every ask; the text is the one it answers without ids.
func TestTokenIDs(t *testing.T) {
	for _, field := range []string{FieldReasoning, FieldNone} {
		t.Run(field, func(t *testing.T) {
			_, ts := start(t, Options{MeanTokens: 60, Seed: 3, ReasoningField: field})
			for i := range 5 {
				text := fmt.Sprintf("question %d: what is\t%d + %d?", i, i, i)
				body := tokenBody(text, 0, false)
				st := askTokens(t, ts.URL, body, true)
				pl := askTokens(t, ts.URL, body, false)
				again := askTokens(t, ts.URL, body, true)
				wantPrompt := tokenids.Prompt("You are terse.", text)
				for name, a := range map[string]tokenAnswer{"streamed": st, "plain": pl} {
					if !slices.Equal(a.prompt, wantPrompt) || len(a.prompt) != a.promptN {
						t.Errorf("%s: prompt ids %v (usage %d), want %v", name, a.prompt, a.promptN, wantPrompt)
					}
					if len(a.ids) != a.completion || a.completion == 0 {
						t.Errorf("%s: %d ids, usage.completion_tokens %d", name, len(a.ids), a.completion)
					}
					if spelled, text := spell(t, name, a.ids), strings.NewReplacer(thinkOpen, "", thinkClose, "").Replace(a.text); spelled != text {
						t.Errorf("%s: the ids spell %q, the answer is %q", name, spelled, text)
					}
					if a.logprobs != nil {
						t.Errorf("%s: logprobs unasked", name)
					}
				}
				if !slices.Equal(st.ids, pl.ids) || !slices.Equal(st.ids, again.ids) {
					t.Errorf("streamed %v, plain %v, again %v: want one answer", st.ids, pl.ids, again.ids)
				}
				without := stream(t, ts.URL, map[string]any{"messages": userMessages(text), "max_tokens": 200}, field, true)
				if without.Reasoning+without.Content != st.text {
					t.Errorf("the answer with ids differs from the one without")
				}
			}
		})
	}
}

// TestTokenLogprobs: asked for K logprobs, every token has its logprob and
// K alternatives, itself first, named by id or by text as asked, the same
// streamed and plain; the logprobs are below 0, each alternative below the one before.
func TestTokenLogprobs(t *testing.T) {
	_, ts := start(t, Options{MeanTokens: 40, Seed: 4})
	for _, byID := range []bool{true, false} {
		t.Run(fmt.Sprint("by id ", byID), func(t *testing.T) {
			body := tokenBody("name three colours", 5, byID)
			st := askTokens(t, ts.URL, body, true)
			pl := askTokens(t, ts.URL, body, false)
			if len(st.logprobs) != len(st.ids) || len(st.ids) == 0 {
				t.Fatalf("%d logprobs for %d ids", len(st.logprobs), len(st.ids))
			}
			if !reflect.DeepEqual(st.logprobs, pl.logprobs) || !reflect.DeepEqual(st.altNames, pl.altNames) || !reflect.DeepEqual(st.altLPs, pl.altLPs) {
				t.Error("streamed and plain logprobs differ")
			}
			for i, id := range st.ids {
				names := st.altNames[i]
				if len(names) != 5 {
					t.Fatalf("token %d: %d alternatives, want 5", i, len(names))
				}
				piece, _ := tokenids.Text(id)
				if want := map[bool]string{true: "token_id:" + strconv.Itoa(int(id)), false: piece}[byID]; names[0] != want {
					t.Errorf("token %d: first alternative %q, want the token itself %q", i, names[0], want)
				}
				if st.altLPs[i][0] != st.logprobs[i] || st.logprobs[i] >= 0 {
					t.Errorf("token %d: logprob %v, first alternative's %v", i, st.logprobs[i], st.altLPs[i][0])
				}
				for j := 1; j < 5; j++ {
					if !(st.altLPs[i][j] < st.altLPs[i][j-1]) {
						t.Errorf("token %d: alternatives' logprobs %v not falling", i, st.altLPs[i])
					}
				}
			}
		})
	}
}

// TestIgnoreTokenIDs: a server told to ignore return_token_ids answers
// without any id (no key at all), its logprobs still there.
func TestIgnoreTokenIDs(t *testing.T) {
	_, ts := start(t, Options{MeanTokens: 30, Seed: 5, IgnoreTokenIDs: true})
	for _, streamed := range []bool{true, false} {
		a := askTokens(t, ts.URL, tokenBody("hello", 2, true), streamed)
		if a.sawIDs || a.completion == 0 || len(a.logprobs) != a.completion {
			t.Errorf("streamed %v: ids seen %v, %d logprobs for %d tokens", streamed, a.sawIDs, len(a.logprobs), a.completion)
		}
	}
}

// TestTokenRequestRefusals: vLLM's 400s for logprobs it will not give.
func TestTokenRequestRefusals(t *testing.T) {
	_, ts := start(t, Options{})
	for name, extra := range map[string]map[string]any{
		"top_logprobs without logprobs": {"top_logprobs": 3},
		"top_logprobs above 20":         {"logprobs": true, "top_logprobs": 21},
		"top_logprobs negative":         {"logprobs": true, "top_logprobs": -1},
	} {
		body := map[string]any{"messages": userMessages("x")}
		maps.Copy(body, extra)
		resp := post(t, context.Background(), ts.URL, body)
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest || !strings.Contains(string(b), "logprobs") {
			t.Errorf("%s: %d %s, want a 400 naming logprobs", name, resp.StatusCode, b)
		}
	}
}

// TestPromptIDsAsUsage: a prompt has as many ids as its usage counts
// tokens.
func TestPromptIDsAsUsage(t *testing.T) {
	req := chatRequest{Messages: []chatMessage{{Role: "user", Content: "a b\tc\nd"}}}
	if n := len(tokenids.Prompt("a b\tc\nd")); n != req.promptTokens() {
		t.Errorf("%d ids, usage counts %d", n, req.promptTokens())
	}
}
