package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/pflag"
)

// PromptConfig makes each row's prompt from the row's own fields.
type PromptConfig struct {
	// Messages are the turns sent, each content a Go text/template
	// rendered over the row's fields ({{.question}}, {{.meta.lang}}); empty:
	// the prompt is the row's own (dataset.format).
	Messages []PromptMessage `mapstructure:"messages"`
}

// PromptMessage is one turn of prompt.messages.
type PromptMessage struct {
	Role    string `json:"role"`
	Content string `json:"content"`
}

// promptMessagesKey is a list of {role, content} mappings: taken from the
// file as written (as extra_body is), and as a JSON list from a flag or the
// environment.
const promptMessagesKey = "prompt.messages"

// handLoaded are the keys whose values are not scalars, which Load reads
// itself instead of through viper.
var handLoaded = map[string]bool{extraBodyKey: true, promptMessagesKey: true}

// loadPromptMessages applies Load's precedence to prompt.messages: a flag,
// then the environment (each a JSON list of {"role", "content"}), then the
// file's list.
func loadPromptMessages(fs *pflag.FlagSet, tree *fileTree) (raw any, msgs []PromptMessage, err error) {
	if f := lookupFlag(fs, promptMessagesKey); f != nil && f.Changed {
		s := f.Value.String()
		msgs, err = promptMessagesJSON(s)
		return s, msgs, err
	}
	if s, ok := os.LookupEnv(EnvName(promptMessagesKey)); ok && s != "" {
		msgs, err = promptMessagesJSON(s)
		return s, msgs, err
	}
	if val, ok := tree.lookup(promptMessagesKey); ok {
		msgs, err = promptMessagesOf(val)
		return val, msgs, err
	}
	return nil, nil, nil
}

// promptMessagesJSON reads the flag and environment form.
func promptMessagesJSON(s string) ([]PromptMessage, error) {
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		return nil, fmt.Errorf(`not a JSON list of {"role": ..., "content": ...}: %w`, err)
	}
	return promptMessagesOf(v)
}

// promptMessagesOf reads a decoded list of {role, content} mappings; null
// is no list.
func promptMessagesOf(v any) ([]PromptMessage, error) {
	if v == nil {
		return nil, nil
	}
	list, ok := v.([]any)
	if !ok {
		return nil, fmt.Errorf("must be a list of {role, content} turns, not %s", describe(v))
	}
	var out []PromptMessage
	for i, e := range list {
		m, ok := e.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("entry %d: must be a mapping with role and content, not %s", i+1, describe(e))
		}
		var pm PromptMessage
		for k, val := range m {
			s, isString := val.(string)
			switch {
			case k != "role" && k != "content":
				return nil, fmt.Errorf("entry %d: unknown key %q: a turn has role and content", i+1, k)
			case !isString:
				return nil, fmt.Errorf("entry %d: %s: expected a string, not %s (quote a template that starts with {{ in YAML)", i+1, k, describe(val))
			case k == "role":
				pm.Role = s
			default:
				pm.Content = s
			}
		}
		out = append(out, pm)
	}
	return out, nil
}

// promptMessagesText is the flag's form of msgs: a JSON list, "[]" for none.
func promptMessagesText(msgs []PromptMessage) string {
	if len(msgs) == 0 {
		return "[]"
	}
	b, err := json.Marshal(msgs)
	if err != nil {
		return "[]"
	}
	return string(b)
}

// promptRoles are the roles a turn of prompt.messages may have.
var promptRoles = []string{"system", "user", "assistant"}

// validatePrompt checks prompt.messages and the keys it works with. The
// contents are parsed as templates by package dataset/template (Compile),
// which knows the helpers they may call.
func (c Config) validatePrompt(add func(key string, v any, reason string, related ...string)) {
	msgs := c.Prompt.Messages
	for i, m := range msgs {
		key := fmt.Sprintf("%s[%d]", promptMessagesKey, i+1)
		switch {
		case !slices.Contains(promptRoles, m.Role):
			add(key+".role", m.Role, fmt.Sprintf("%q is not one of %s", m.Role, strings.Join(promptRoles, ", ")), promptMessagesKey)
		case strings.TrimSpace(m.Content) == "":
			add(key+".content", m.Content, "is empty: write the turn's template", promptMessagesKey)
		}
	}
	if n := len(msgs); n > 0 && msgs[n-1].Role != "user" && slices.Contains(promptRoles, msgs[n-1].Role) {
		add(fmt.Sprintf("%s[%d].role", promptMessagesKey, n), msgs[n-1].Role, fmt.Sprintf("%q: the last turn must be a user turn (the answer follows it)", msgs[n-1].Role), promptMessagesKey)
	}
	f := c.Dataset.Format
	switch {
	case len(msgs) == 0 && f == "rows":
		add("dataset.format", f, "rows: the prompt is made by prompt.messages, which is empty; set it, or name the rows' shape", promptMessagesKey)
	case len(msgs) > 0 && f != "auto" && f != "rows":
		add(promptMessagesKey, "(template)", fmt.Sprintf("makes the prompt of each row's fields, and dataset.format %s makes it of the row's own turns: set dataset.format to auto or rows, or remove prompt.messages", f), "dataset.format")
	case len(msgs) > 0 && c.Generation.Turns == "all":
		add(promptMessagesKey, "(template)", "makes one prompt per row, and generation.turns all regenerates a dataset's own conversations: use turns first", "generation.turns")
	}
}

// unquotedTemplateHint is what to do about a YAML error that an unquoted
// template makes: `content: {{.q}}` is a mapping inside a mapping to YAML.
func unquotedTemplateHint(file []byte, err error) string {
	if !strings.Contains(err.Error(), "invalid map key") || !bytes.Contains(file, []byte("{{")) {
		return ""
	}
	return `; a template that starts with {{ is quoted in YAML: content: "{{.q}} ..." (or written as a block, content: |)`
}
