package toolong

import "testing"

func TestParseTooLong(t *testing.T) {
	cases := []struct {
		name string
		msg  string
		want Sizes
		ok   bool
	}{
		{"classic (vLLM <= 0.6, OpenAI)", "This model's maximum context length is 4096 tokens. However, you requested 5000 tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the messages or completion.",
			Sizes{Context: 4096, Requested: 5000, Prompt: 4000, Completion: 1000}, true},
		{"classic, completions endpoint", "This model's maximum context length is 2048 tokens. However, you requested 2100 tokens (2000 in the prompt, 100 in the completion). Please reduce your prompt; or completion length.",
			Sizes{Context: 2048, Requested: 2100, Prompt: 2000, Completion: 100}, true},
		{"classic, no max_tokens", "This model's maximum context length is 4096 tokens. However, you requested 4200 tokens in the messages, Please reduce the length of the messages.",
			Sizes{Context: 4096, Requested: 4200, Prompt: 4200}, true},
		{"input alone", "This model's maximum context length is 1536 tokens. However, your request has 4176 input tokens. Please reduce the length of the input messages.",
			Sizes{Context: 1536, Prompt: 4176}, true},
		{"max_tokens too large (vLLM 0.9-0.11)", "'max_tokens' or 'max_completion_tokens' is too large: 1000. This model's maximum context length is 4096 tokens and your request has 3500 input tokens (1000 > 4096 - 3500). None",
			Sizes{Context: 4096, Requested: 4500, Prompt: 3500, Completion: 1000}, true},
		{"output tokens and prompt (current vLLM)", "This model's maximum context length is 4096 tokens. However, you requested 1000 output tokens and your prompt contains at least 4000 input tokens, for a total of at least 5000 tokens. Please reduce the length of the input prompt or the number of requested output tokens. (parameter=input_tokens, value=4000)",
			Sizes{Context: 4096, Requested: 5000, Prompt: 4000, Completion: 1000}, true},
		{"output tokens and prompt, exact", "This model's maximum context length is 32768 tokens. However, you requested 8192 output tokens and your prompt contains 24577 input tokens, for a total of 32769 tokens. Please reduce the length of the input prompt or the number of requested output tokens.",
			Sizes{Context: 32768, Requested: 32769, Prompt: 24577, Completion: 8192}, true},
		{"engine layer", "The decoder prompt (length 5000) is longer than the maximum model length of 4096. Make sure that `max_model_len` is no smaller than the number of text tokens.",
			Sizes{Context: 4096, Prompt: 5000}, true},
		{"unknown wording with the key phrase", "This model's maximum context length is 8192 tokens.", Sizes{Context: 8192}, true},
		{"another 400", "temperature must be non-negative", Sizes{}, false},
		{"model not found", "The model `x` does not exist.", Sizes{}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			got, ok := Parse(c.msg)
			if ok != c.ok || got != c.want {
				t.Errorf("Parse = %+v, %v; want %+v, %v", got, ok, c.want, c.ok)
			}
		})
	}
}
