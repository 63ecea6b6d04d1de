package mockserver

import (
	"bufio"
	"context"
	"encoding/json"
	"strings"
	"testing"
)

// choiceTexts reads a plain answer's choices by index, and its usage.
func plainChoices(t *testing.T, url string, body map[string]any) (texts map[int]string, finishes int, completion int) {
	t.Helper()
	resp := post(t, context.Background(), url, body)
	defer resp.Body.Close()
	var got struct {
		Choices []struct {
			Index   int `json:"index"`
			Message struct {
				Reasoning string `json:"reasoning"`
				Content   string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			Completion int `json:"completion_tokens"`
		} `json:"usage"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&got); err != nil {
		t.Fatal(err)
	}
	texts = map[int]string{}
	for _, c := range got.Choices {
		texts[c.Index] = c.Message.Reasoning + "|" + c.Message.Content
		if c.FinishReason != "" {
			finishes++
		}
	}
	return texts, finishes, got.Usage.Completion
}

// streamChoices reads a streamed answer's choices by index.
func streamChoices(t *testing.T, url string, body map[string]any) (texts map[int]string, finishes map[int]string, completion int) {
	t.Helper()
	resp := post(t, context.Background(), url, body)
	defer resp.Body.Close()
	texts, finishes = map[int]string{}, map[int]string{}
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line, ok := strings.CutPrefix(sc.Text(), "data: ")
		if !ok || line == "[DONE]" {
			continue
		}
		var c struct {
			Choices []struct {
				Index int `json:"index"`
				Delta struct {
					Reasoning string `json:"reasoning"`
					Content   string `json:"content"`
				} `json:"delta"`
				FinishReason string `json:"finish_reason"`
			} `json:"choices"`
			Usage *struct {
				Completion int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal([]byte(line), &c); err != nil {
			t.Fatalf("chunk %q: %v", line, err)
		}
		for _, ch := range c.Choices {
			texts[ch.Index] += ch.Delta.Reasoning + ch.Delta.Content
			if ch.FinishReason != "" {
				finishes[ch.Index] = ch.FinishReason
			}
		}
		if c.Usage != nil {
			completion = c.Usage.Completion
		}
	}
	return texts, finishes, completion
}

func TestNChoicesPlain(t *testing.T) {
	s, ts := start(t, Options{MeanTokens: 12, Seed: 3})
	body := map[string]any{"model": "mock-model", "messages": userMessages("four answers"), "n": 4}
	texts, finishes, completion := plainChoices(t, ts.URL, body)
	if len(texts) != 4 || finishes != 4 {
		t.Fatalf("got %d choices, %d finished, want 4: %v", len(texts), finishes, texts)
	}
	distinct := map[string]bool{}
	for i := range 4 {
		distinct[texts[i]] = true
	}
	if len(distinct) != 4 {
		t.Errorf("choices not distinct: %v", texts)
	}
	if completion < 8 {
		t.Errorf("usage counts %d completion tokens for 4 choices", completion)
	}
	// Choice 0 is what the same prompt gets alone.
	delete(body, "n")
	alone, _, _ := plainChoices(t, ts.URL, body)
	if alone[0] != texts[0] {
		t.Errorf("choice 0 %q, alone %q", texts[0], alone[0])
	}
	if got := s.Stats().Requests; got != 2 {
		t.Errorf("mock counted %d requests, want 2", got)
	}
}

func TestNChoicesStreamed(t *testing.T) {
	_, ts := start(t, Options{MeanTokens: 12, Seed: 3})
	body := map[string]any{"model": "mock-model", "messages": userMessages("three answers"), "n": 3, "stream": true,
		"stream_options": map[string]any{"include_usage": true}}
	texts, finishes, completion := streamChoices(t, ts.URL, body)
	if len(texts) != 3 || len(finishes) != 3 {
		t.Fatalf("got %d choices, %d finished, want 3", len(texts), len(finishes))
	}
	if texts[0] == texts[1] || texts[1] == texts[2] || texts[0] == texts[2] {
		t.Errorf("choices not distinct: %v", texts)
	}
	plain, _, plainCompletion := plainChoices(t, ts.URL, map[string]any{"model": "mock-model", "messages": userMessages("three answers"), "n": 3})
	for i := range 3 {
		if strings.ReplaceAll(plain[i], "|", "") != texts[i] {
			t.Errorf("choice %d streamed %q, plain %q", i, texts[i], plain[i])
		}
	}
	if completion != plainCompletion || completion == 0 {
		t.Errorf("usage %d streamed, %d plain", completion, plainCompletion)
	}
}

func TestIgnoreN(t *testing.T) {
	_, ts := start(t, Options{MeanTokens: 12, Seed: 3, IgnoreN: true})
	body := map[string]any{"model": "mock-model", "messages": userMessages("ignored"), "n": 4}
	if texts, _, _ := plainChoices(t, ts.URL, body); len(texts) != 1 {
		t.Errorf("plain: %d choices, want 1", len(texts))
	}
	body["stream"] = true
	if texts, _, _ := streamChoices(t, ts.URL, body); len(texts) != 1 {
		t.Errorf("stream: %d choices, want 1", len(texts))
	}
}
