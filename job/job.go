package job

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"strings"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/dataset"
)

// Job is what a run asks: which rows (Selection), how a row becomes the
// conversation sent (Prompt), and how the model answers it (Sampling). It
// is stored typed in the output directory's manifest, and run, resume and
// inspect all read it from there.
//
// Every field that changes the answers carries a `key` tag naming the
// setting it comes from; Identity, the hash and the message refusing a
// changed job all derive from those tags. A new selection or sampling
// option is one field here (or in dataset.Selection) with its tag.
//
// A request row's own sampling fields (an openai-batch row's temperature,
// max_tokens, ...: dataset.Prompt.Params) replace the job's for that row
// and are no settings here: the dataset's identity (Selection.Content, the
// size and hash of every local file; an hf:// dataset's pinned revision)
// already changes with any of them, so an edited row is a changed job and
// the rows need no second hashing.
type Job struct {
	Selection dataset.Selection `json:"selection"`
	Prompt    Prompting         `json:"prompt"`
	Sampling  Sampling          `json:"sampling"`
}

// Prompting is how a dataset row becomes the messages sent.
type Prompting struct {
	// SystemPrompt replaces or sets the system turn when not empty.
	SystemPrompt string `json:"system_prompt,omitempty" key:"generation.system_prompt"`
	// Turns is which assistant turns of a row the model answers.
	Turns Turns `json:"turns,omitempty" key:"generation.turns"`
	// Template is prompt.messages: the turns sent, each content a
	// template rendered over the row's own fields (dataset.Template);
	// empty: the row's own turns.
	Template []chat.Message `json:"messages,omitempty" key:"prompt.messages,zero"`
}

// Turns is generation.turns: TurnsFirst answers the conversation up to its
// first assistant turn; TurnsAll regenerates every assistant turn in
// sequence, each asked with the model's own earlier answers (their content
// only: earlier reasoning is held back, as reasoning models' chat templates
// do), so that a multi-turn row becomes a conversation written wholly by
// the model. Empty means TurnsFirst.
type Turns string

// The values of Turns.
const (
	TurnsFirst Turns = "first"
	TurnsAll   Turns = "all"
)

// Identity is the value hashed: empty and "first" are one job.
func (t Turns) Identity() string {
	if t == "" {
		return string(TurnsFirst)
	}
	return string(t)
}

func (t Turns) String() string { return t.Identity() }

// Whole reports whether the job regenerates whole conversations.
func (p Prompting) Whole() bool { return p.Turns == TurnsAll }

// Sampling is what the server is asked to do with each prompt.
type Sampling struct {
	Model       string         `json:"model" key:"endpoint.model"`
	MaxTokens   int            `json:"max_tokens" key:"generation.max_tokens"`
	Temperature float64        `json:"temperature" key:"generation.temperature"` // sent as is, 0 included
	TopP        float64        `json:"top_p" key:"generation.top_p"`
	Extra       map[string]any `json:"extra_body,omitempty" key:"generation.extra_body"` // merged into every request body
	Samples     int            `json:"n" key:"generation.n"`                             // answers per prompt: keys (id, 0..n-1)
	OnLength    OnLength       `json:"on_length,omitempty" key:"generation.on_length"`
	// ResponseFormat is the shape asked of every answer's content
	// (responseformat.go); an answer not in it is asked again.
	ResponseFormat ResponseFormat `json:"response_format,omitzero" key:"generation.response_format,zero"`
	// ReturnTokenIDs asks the server for the token ids of each prompt and
	// answer (vLLM's return_token_ids): what the model conditioned on and
	// generated, exactly, for training that must not re-tokenize.
	ReturnTokenIDs bool `json:"return_token_ids,omitempty" key:"generation.return_token_ids,zero"`
	// Logprobs is how many alternatives, with their logprobs, each
	// generated token's logprob comes with (OpenAI's top_logprobs, at most
	// MaxLogprobs); 0 asks for no logprobs.
	Logprobs int `json:"logprobs,omitempty" key:"generation.logprobs,zero"`
	// ToolChoice is sent with a row that has tools (unless the row names
	// its own); "" is auto, the default, so that jobs made before it keep
	// their hash.
	ToolChoice string `json:"tool_choice,omitempty" key:"generation.tool_choice,zero"`
}

// MaxLogprobs is the most alternatives per token generation.logprobs may
// ask for: OpenAI's limit and vLLM's default --max-logprobs.
const MaxLogprobs = 20

// OnLength is generation.on_length: what an answer cut at max_tokens
// (finish_reason "length") does. LengthKeep records it as it is;
// LengthRetry asks again with twice the room, up to lengthCap times
// max_tokens, so that a reasoning model cut mid-thought does not bias the
// data toward short answers. Empty means LengthKeep.
type OnLength string

// The values of OnLength.
const (
	LengthKeep  OnLength = "keep"
	LengthRetry OnLength = "retry"
)

// lengthCap bounds the room a retried answer gets, in multiples of
// max_tokens: two doublings.
const lengthCap = 4

// Identity is the value hashed: empty and "keep" are one job.
func (o OnLength) Identity() string {
	if o == "" {
		return string(LengthKeep)
	}
	return string(o)
}

func (o OnLength) String() string { return o.Identity() }

// MoreRoom is the max_tokens to ask again with after an answer cut at
// current, or 0 when the policy or the cap says keep it. A row that sets
// its own max_tokens keeps it: the row's value is what it asks for.
func (s Sampling) MoreRoom(current int, params map[string]any) int {
	if s.OnLength != LengthRetry || current <= 0 {
		return 0
	}
	for _, k := range []string{"max_tokens", "max_completion_tokens"} {
		if _, own := params[k]; own {
			return 0
		}
	}
	if next := min(2*current, lengthCap*s.MaxTokens); next > current {
		return next
	}
	return 0
}

// samples is the number of answers per prompt, at least 1.
func (s Sampling) Count() int { return max(s.Samples, 1) }

// identitier is a field value with its own canonical text for the hash
// (dataset/stamp.Content leaves file names out of it).
type identitier interface{ Identity() string }

// setting is one answer-changing field: its key, the canonical text that is
// hashed and compared, and the text shown to a person. A part setting
// (tagged `key:"name,part"`) says which part of the job a directory holds:
// a resume compares it, but the hash leaves it out, so that the shards of
// one job, each in its own directory, share one hash and combine. A
// setting tagged `key:"name,zero"` is left out of the hash while it holds
// its zero value: a setting added after directories were made keeps their
// jobs' hashes (a resume compares it all the same, and the zero value is
// what such a directory's job means).
type setting struct {
	key, canon, shown string
	part              bool
	zero              bool // left out of the hash: tagged zero and at its zero value
	value             any  // the field's value, for DescribeChange
}

// settings lists the job's answer-changing fields in key order.
func (j Job) settings() []setting {
	var out []setting
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		t := v.Type()
		for i := range t.NumField() {
			f, fv := t.Field(i), v.Field(i)
			switch key := f.Tag.Get("key"); key {
			case "-":
			case "":
				if fv.Kind() == reflect.Struct {
					walk(fv)
				}
			default:
				name, opt, _ := strings.Cut(key, ",")
				canon, shown := canonical(fv)
				out = append(out, setting{key: name, canon: canon, shown: shown, part: opt == "part", zero: opt == "zero" && fv.IsZero(), value: fv.Interface()})
			}
		}
	}
	walk(reflect.ValueOf(j))
	slices.SortFunc(out, func(a, b setting) int { return strings.Compare(a.key, b.key) })
	return out
}

// canonical is a field's text for the hash and for people. Numbers are
// written the shortest way that reads back the same; maps as JSON with
// sorted keys (an empty map as "{}", so absent and empty extra_body agree).
func canonical(v reflect.Value) (canon, shown string) {
	if id, ok := v.Interface().(identitier); ok {
		return id.Identity(), fmt.Sprint(v.Interface())
	}
	switch v.Kind() {
	case reflect.String:
		return v.String(), v.String()
	case reflect.Int, reflect.Int64:
		s := strconv.FormatInt(v.Int(), 10)
		return s, s
	case reflect.Float64:
		s := strconv.FormatFloat(v.Float(), 'g', -1, 64)
		return s, s
	case reflect.Map:
		if v.Len() == 0 {
			return "{}", "{}"
		}
	case reflect.Slice:
		if v.Len() == 0 {
			return "", "(none)"
		}
	}
	if m, ok := v.Interface().(interface{ MarshalText() ([]byte, error) }); ok {
		b, err := m.MarshalText()
		if err == nil {
			return string(b), string(b)
		}
	}
	b, err := json.Marshal(v.Interface())
	if err != nil {
		// Config validation rejects bodies that do not encode; a Job built
		// by hand still gets a stable, visibly wrong value.
		s := "!unencodable: " + err.Error()
		return s, s
	}
	return string(b), string(b)
}

// Hash is the job's identity: the hex sha256 of its answer-changing
// settings, the shard left out. Two jobs with one hash ask the same
// questions the same way; their directories combine into one dataset.
func (j Job) Hash() string {
	h := sha256.New()
	for _, s := range j.settings() {
		if s.part || s.zero {
			continue
		}
		// Length prefixes keep "a=b" + "c" and "a" + "b=c" apart.
		fmt.Fprintf(h, "%d:%s=%d:%s\n", len(s.key), s.key, len(s.canon), s.canon)
	}
	return hex.EncodeToString(h.Sum(nil))
}

// Change is one answer-changing setting that differs between two jobs.
type Change struct {
	Key, Old, New string
	// Detail says what changed inside a setting made of parts (a first
	// pass's directory: which part is new); "" for the others.
	Detail string
}

// describer is a setting's value that says what changed in it.
type describer interface{ DescribeChange(old any) string }

// Diff lists the settings of j that differ from old, in key order.
func (j Job) Diff(old Job) []Change {
	was := map[string]setting{}
	for _, s := range old.settings() {
		was[s.key] = s
	}
	var out []Change
	for _, s := range j.settings() {
		if o := was[s.key]; o.canon != s.canon {
			c := Change{Key: s.key, Old: o.shown, New: s.shown}
			if d, ok := s.value.(describer); ok && o.value != nil {
				c.Detail = d.DescribeChange(o.value)
			}
			out = append(out, c)
		}
	}
	return out
}

// Samples is the number of answers asked per prompt.
func (j Job) Samples() int { return j.Sampling.Count() }

// Total is the number of keys the job asks of a selection of rows rows.
func (j Job) Total(rows int64) int64 { return rows * int64(j.Samples()) }

// Messages is the conversation sent for p: its turns, with the system turn
// replaced or set when the job has a system prompt.
func (p Prompting) Messages(turns []chat.Message) []chat.Message {
	msgs := make([]chat.Message, 0, len(turns)+1)
	if p.SystemPrompt != "" {
		msgs = append(msgs, chat.Message{Role: "system", Content: p.SystemPrompt})
	}
	for _, m := range turns {
		if m.Role == "system" && p.SystemPrompt != "" {
			continue
		}
		if len(m.ToolCalls) == 0 {
			m.ToolCalls = nil // a row's empty tool_calls list is none, in the record as in the request
		}
		msgs = append(msgs, m)
	}
	return msgs
}
