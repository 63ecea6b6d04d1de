package config

import (
	"reflect"
	"strings"
	"testing"
)

var qaTurns = []PromptMessage{
	{Role: "system", Content: "Answer in {{.lang}}."},
	{Role: "user", Content: "Context: {{.context}}\nQuestion: {{.question}}\n"},
}

// TestPromptMessagesSources: the file's list (YAML, TOML, JSON), the
// environment's and the flag's JSON list give the same turns, with Load's
// precedence.
func TestPromptMessagesSources(t *testing.T) {
	const yamlFile = `prompt:
  messages:
    - role: system
      content: "Answer in {{.lang}}."
    - role: user
      content: |
        Context: {{.context}}
        Question: {{.question}}
`
	const tomlFile = `[[prompt.messages]]
role = "system"
content = "Answer in {{.lang}}."

[[prompt.messages]]
role = "user"
content = "Context: {{.context}}\nQuestion: {{.question}}\n"
`
	const jsonList = `[{"role":"system","content":"Answer in {{.lang}}."},{"role":"user","content":"Context: {{.context}}\nQuestion: {{.question}}\n"}]`
	for _, tt := range []struct {
		name string
		file string // name: body
		env  string
		args []string
	}{
		{name: "yaml", file: "c.yaml:" + yamlFile},
		{name: "toml", file: "c.toml:" + tomlFile},
		{name: "json", file: `c.json:{"prompt": {"messages": ` + jsonList + `}}`},
		{name: "env", env: jsonList},
		{name: "flag", args: []string{"--prompt.messages", jsonList}},
		{name: "flag over env and file", file: "c.yaml:prompt: {messages: [{role: user, content: other}]}\n",
			env: `[{"role":"user","content":"env"}]`, args: []string{"--prompt.messages", jsonList}},
		{name: "env over file", file: "c.yaml:prompt: {messages: [{role: user, content: other}]}\n", env: jsonList},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.env != "" {
				t.Setenv("SYNTHGEN_PROMPT_MESSAGES", tt.env)
			}
			path := ""
			if tt.file != "" {
				name, body, _ := strings.Cut(tt.file, ":")
				path = writeFile(t, name, body)
			}
			got, err := Load(cmdFlags(t, tt.args...), path)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got.Prompt.Messages, qaTurns) {
				t.Errorf("got %q, want %q", got.Prompt.Messages, qaTurns)
			}
			if turns := got.Redacted()["prompt"].(map[string]any)["messages"].([]any); len(turns) != 2 ||
				turns[1].(map[string]any)["content"] != qaTurns[1].Content {
				t.Errorf("the manifest's config holds %v", turns)
			}
		})
	}
}

func TestPromptMessagesRefused(t *testing.T) {
	for _, tt := range []struct {
		name, file string
		args       []string
		want       string
	}{
		{name: "not a list", file: "prompt:\n  messages: hello\n", want: `c.yaml:2: prompt.messages: must be a list of {role, content} turns, not "hello"`},
		{name: "an entry not a mapping", file: "prompt:\n  messages:\n    - hi\n", want: "c.yaml:2: prompt.messages: entry 1: must be a mapping with role and content"},
		{name: "a content not text", file: "prompt:\n  messages:\n    - role: user\n      content: {a: 1}\n", want: "entry 1: content: expected a string, not a mapping (quote a template that starts with {{ in YAML)"},
		{name: "an unquoted template", file: "prompt:\n  messages:\n    - role: user\n      content: {{.q}}\n", want: `a template that starts with {{ is quoted in YAML: content: "{{.q}} ..."`},
		{name: "an unknown turn key", file: "prompt:\n  messages:\n    - {role: user, text: x}\n", want: `entry 1: unknown key "text"`},
		{name: "an unknown role", file: "prompt:\n  messages:\n    - {role: bot, content: x}\n", want: `c.yaml:2: prompt.messages[1].role: "bot" is not one of system, user, assistant`},
		{name: "an empty content", file: "prompt:\n  messages:\n    - {role: user, content: ' '}\n", want: "prompt.messages[1].content: is empty"},
		{name: "ends with an answer", file: "prompt:\n  messages:\n    - {role: user, content: q}\n    - {role: assistant, content: a}\n", want: `prompt.messages[2].role: "assistant": the last turn must be a user turn`},
		{name: "another row shape", file: "dataset: {format: sharegpt}\nprompt:\n  messages: [{role: user, content: x}]\n", want: "c.yaml:3: prompt.messages: makes the prompt of each row's fields, and dataset.format sharegpt"},
		{name: "turns all", file: "generation: {turns: all}\nprompt:\n  messages: [{role: user, content: x}]\n", want: "generation.turns all regenerates"},
		{name: "rows without a template", file: "dataset: {format: rows}\n", want: "c.yaml:1: dataset.format: rows: the prompt is made by prompt.messages, which is empty"},
		{name: "flag not JSON", args: []string{"--prompt.messages", "{{.q}}"}, want: `flag --prompt.messages: prompt.messages: not a JSON list of {"role": ..., "content": ...}`},
		{name: "unknown key under prompt", file: "prompt:\n  template: x\n", want: `unknown key "prompt.template"`},
	} {
		t.Run(tt.name, func(t *testing.T) {
			path := ""
			if tt.file != "" {
				path = writeFile(t, "c.yaml", tt.file)
			}
			_, err := Load(cmdFlags(t, tt.args...), path)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("error %v\nwant %q", err, tt.want)
			}
		})
	}
}
