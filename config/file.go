package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"

	"github.com/pelletier/go-toml/v2"
	"go.yaml.in/yaml/v3"
)

// fileTree is a config file decoded into its own nested maps, before viper
// sees it: the unknown-key check walks it (viper lowercases keys and its
// UnmarshalExact neither names the file nor tolerates non-config flags),
// extra_body is taken from it with its keys as written, and lines lets
// errors point at file:line (YAML only; TOML and JSON give the file).
type fileTree struct {
	path  string
	root  map[string]any
	lines map[string]int // dotted key -> 1-based line of the key
	// objects holds, by dotted key, the JSON text of a mapping written
	// under a key that takes one (generation.response_format), its keys
	// in the order written (YAML and JSON files; TOML keeps no order).
	objects map[string]string
}

// where names the place a key was set in the file: "my.yaml:7" or "my.yaml".
func (t *fileTree) where(key string) string {
	if n, ok := t.lines[key]; ok {
		return t.path + ":" + strconv.Itoa(n)
	}
	return t.path
}

// lookup returns the value of a dotted key in the file and whether it is there.
func (t *fileTree) lookup(key string) (any, bool) {
	if t == nil {
		return nil, false
	}
	m := t.root
	parts := strings.Split(key, ".")
	for _, p := range parts[:len(parts)-1] {
		sub, ok := m[p].(map[string]any)
		if !ok {
			return nil, false
		}
		m = sub
	}
	v, ok := m[parts[len(parts)-1]]
	return v, ok
}

// readFile reads and decodes a config file chosen by its extension.
func readFile(path string) (*fileTree, error) {
	ext := strings.ToLower(filepath.Ext(path))
	var decode func(path string, b []byte) (*fileTree, error)
	switch ext {
	case ".yaml", ".yml":
		decode = decodeYAML
	case ".toml":
		decode = decodeTOML
	case ".json":
		decode = decodeJSON
	case "":
		return nil, fmt.Errorf("config file %s: no extension: name it .yaml, .yml, .toml or .json", path)
	default:
		return nil, fmt.Errorf("config file %s: unsupported extension %q: use .yaml, .yml, .toml or .json", path, ext)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("read config: %w", err)
	}
	t, err := decode(path, b)
	if err != nil {
		return nil, err
	}
	if err := t.check(); err != nil {
		return nil, err
	}
	return t, nil
}

func decodeYAML(path string, b []byte) (*fileTree, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	var doc yaml.Node
	if err := dec.Decode(&doc); err != nil {
		if errors.Is(err, io.EOF) {
			return &fileTree{path: path, root: map[string]any{}}, nil
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	// A second document would be silently ignored by a plain Unmarshal.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		return nil, fmt.Errorf("%s:%d: a second YAML document: a config file holds one", path, extra.Line)
	}
	t := &fileTree{path: path, root: map[string]any{}, lines: map[string]int{}}
	if len(doc.Content) == 0 {
		return t, nil
	}
	top := doc.Content[0]
	if top.Kind == yaml.ScalarNode && top.Tag == "!!null" {
		return t, nil
	}
	if top.Kind != yaml.MappingNode {
		return nil, fmt.Errorf("%s:%d: the top level must be a mapping of keys, not %s", path, top.Line, yamlKind(top))
	}
	var raw any
	if err := top.Decode(&raw); err != nil {
		return nil, fmt.Errorf("%s: %w%s", path, err, unquotedTemplateHint(b, err))
	}
	root, ok := normalize(raw).(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s:%d: the top level must be a mapping of keys", path, top.Line)
	}
	t.root = root
	yamlLines(top, "", t.lines, 0)
	if n := yamlChild(top, responseFormatKey); n != nil && n.Kind == yaml.MappingNode {
		text, err := yamlJSON(n, 0)
		if err != nil {
			return nil, fmt.Errorf("%s:%d: %s: %w", path, n.Line, responseFormatKey, err)
		}
		t.objects = map[string]string{responseFormatKey: string(text)}
	}
	return t, nil
}

// yamlLines records the line of every mapping key, by dotted path. It does
// not follow aliases: keys under one are written at the anchor, and aliases
// of aliases make a small file describe an exponentially large tree.
func yamlLines(n *yaml.Node, prefix string, lines map[string]int, depth int) {
	if depth > 64 || n.Kind != yaml.MappingNode {
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		full := joinKey(prefix, k.Value)
		if _, seen := lines[full]; !seen {
			lines[full] = k.Line
		}
		yamlLines(v, full, lines, depth+1)
	}
}

func yamlKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.SequenceNode:
		return "a list"
	case yaml.ScalarNode:
		return fmt.Sprintf("the value %q", n.Value)
	default:
		return "a single value"
	}
}

func decodeTOML(path string, b []byte) (*fileTree, error) {
	var root map[string]any
	if err := toml.Unmarshal(b, &root); err != nil {
		var de *toml.DecodeError
		if errors.As(err, &de) {
			row, col := de.Position()
			return nil, fmt.Errorf("%s:%d:%d: %w", path, row, col, err)
		}
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if root == nil {
		root = map[string]any{}
	}
	m, _ := normalize(root).(map[string]any)
	return &fileTree{path: path, root: m}, nil
}

func decodeJSON(path string, b []byte) (*fileTree, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // keeps large integers in extra_body (seeds) exact
	var raw any
	if err := dec.Decode(&raw); err != nil {
		if errors.Is(err, io.EOF) {
			return nil, fmt.Errorf("%s: empty file: a JSON config is one object", path)
		}
		return nil, fmt.Errorf("%s: %w", path, jsonErrorAt(b, err))
	}
	if _, err := dec.Token(); err != io.EOF {
		line, _ := lineCol(b, dec.InputOffset())
		return nil, fmt.Errorf("%s:%d: data after the top-level object", path, line)
	}
	root, ok := raw.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("%s: the top level must be an object of keys, not %s", path, describe(raw))
	}
	m, _ := normalize(root).(map[string]any)
	t := &fileTree{path: path, root: m}
	// The order of an inline schema's keys, which a map forgets.
	var ordered struct {
		Generation struct {
			ResponseFormat json.RawMessage `json:"response_format"`
		} `json:"generation"`
	}
	if json.Unmarshal(b, &ordered) == nil {
		if rf := bytes.TrimSpace(ordered.Generation.ResponseFormat); len(rf) > 0 && rf[0] == '{' {
			t.objects = map[string]string{responseFormatKey: string(rf)}
		}
	}
	return t, nil
}

// jsonErrorAt prefixes a JSON syntax error with line:col, which
// encoding/json only gives as a byte offset.
func jsonErrorAt(b []byte, err error) error {
	var se *json.SyntaxError
	if errors.As(err, &se) {
		// Offset counts the byte that broke the syntax: point at it.
		line, col := lineCol(b, se.Offset-1)
		return fmt.Errorf("line %d col %d: %w", line, col, err)
	}
	return err
}

func lineCol(b []byte, off int64) (line, col int) {
	off = min(max(off, 0), int64(len(b)))
	before := b[:off]
	line = bytes.Count(before, []byte("\n")) + 1
	col = int(off) - bytes.LastIndexByte(before, '\n')
	return line, col
}

// normalize turns a decoded document into maps with string keys. YAML gives
// map[any]any when a key is not a string (`1: x`); such keys are spelled as
// written so the unknown-key check can name them.
func normalize(v any) any {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			t[k] = normalize(e)
		}
		return t
	case map[any]any:
		m := make(map[string]any, len(t))
		for k, e := range t {
			m[fmt.Sprint(k)] = normalize(e)
		}
		return m
	case []any:
		for i, e := range t {
			t[i] = normalize(e)
		}
		return t
	default:
		return v
	}
}

// check walks the file's tree against the known keys: every key must be a
// known section or key (anything goes below extra_body), sections must hold
// keys, and a key left empty (`temperature:`) is refused rather than quietly
// replaced by its default, except for strings, where empty means "".
func (t *fileTree) check() error {
	var errs []error
	t.walk(t.root, "", &errs)
	return errors.Join(errs...)
}

func (t *fileTree) walk(m map[string]any, prefix string, errs *[]error) {
	names := make([]string, 0, len(m))
	for k := range m {
		names = append(names, k)
	}
	// Report in file order, so the first error is the first in the file.
	sort.Slice(names, func(i, j int) bool {
		li, lj := t.lines[joinKey(prefix, names[i])], t.lines[joinKey(prefix, names[j])]
		if li != lj {
			return li < lj
		}
		return names[i] < names[j]
	})
	for _, name := range names {
		t.walkKey(m, name, joinKey(prefix, name), errs)
	}
}

// walkKey checks key full (m[name]) and turns the values read as
// mappings or lists into the text the key's assign reads.
func (t *fileTree) walkKey(m map[string]any, name, full string, errs *[]error) {
	v := m[name]
	switch {
	case strings.Contains(name, "."):
		*errs = append(*errs, fmt.Errorf("%s: key %q has a dot in it: nest each part under the one before", t.where(full), full))
	case full == promptMessagesKey:
		if _, err := promptMessagesOf(v); err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %s: %v", t.where(full), full, err))
		}
	case full == extraBodyKey:
		switch v.(type) {
		case nil:
			m[name] = map[string]any{}
		case map[string]any:
		default:
			*errs = append(*errs, fmt.Errorf("%s: %s: must be a mapping of request fields, not %s", t.where(full), full, describe(v)))
		}
	case full == priceKey:
		switch v.(type) {
		case nil:
			m[name] = ""
		case map[string]any:
			// Prices are numbers and their order means nothing: the
			// mapping as JSON text, for Price.assign.
			b, err := json.Marshal(v)
			if err != nil {
				*errs = append(*errs, fmt.Errorf("%s: %s: %v", t.where(full), full, err))
				return
			}
			m[name] = string(b)
		case string:
		default:
			*errs = append(*errs, fmt.Errorf("%s: %s: must be a mapping such as {input: 2.5, output: 10, cached_input: 1.25}, not %s", t.where(full), full, describe(v)))
		}
	case full == responseFormatKey:
		switch v.(type) {
		case nil:
			m[name] = ""
		case map[string]any:
			text, ok := t.objects[full]
			if !ok {
				// TOML: its tables keep no order, so the keys go sorted.
				b, err := json.Marshal(v)
				if err != nil {
					*errs = append(*errs, fmt.Errorf("%s: %s: %v", t.where(full), full, err))
					return
				}
				text = string(b)
			}
			m[name] = text
		case string:
		default:
			*errs = append(*errs, fmt.Errorf("%s: %s: must be json_object, @FILE or a mapping (a JSON Schema), not %s", t.where(full), full, describe(v)))
		}
	case sections[full]:
		switch sub := v.(type) {
		case nil:
			m[name] = map[string]any{}
		case map[string]any:
			t.walk(sub, full, errs)
		default:
			*errs = append(*errs, fmt.Errorf("%s: %s: must be a section of keys, not %s", t.where(full), full, describe(v)))
		}
	default:
		t.walkLeaf(m, name, full, errs)
	}
}

// walkLeaf checks a key that holds one value: a known key, a list joined
// for a list key, and no null but for a string.
func (t *fileTree) walkLeaf(m map[string]any, name, full string, errs *[]error) {
	v := m[name]
	k, ok := keyByName[full]
	if !ok {
		*errs = append(*errs, t.unknown(full))
		return
	}
	if list, isList := v.([]any); isList && k.list {
		joined, err := joinList(list)
		if err != nil {
			*errs = append(*errs, fmt.Errorf("%s: %s: %v", t.where(full), full, err))
			return
		}
		m[name] = joined
		return
	}
	if v == nil {
		if _, isString := k.field(&Config{}).(*string); isString {
			m[name] = ""
			return
		}
		*errs = append(*errs, fmt.Errorf("%s: %s: no value: write one, or remove the key to use the default", t.where(full), full))
	}
}

// UnknownKeyError is a key in a config file that is not a config key.
type UnknownKeyError struct {
	File       string // as given to Load
	Line       int    // 0 when the format gives no positions
	Key        string // full dotted key, e.g. "generation.temprature"
	Suggestion string // the nearest known key, or ""
}

func (e *UnknownKeyError) Error() string {
	where := e.File
	if e.Line > 0 {
		where += ":" + strconv.Itoa(e.Line)
	}
	s := fmt.Sprintf("unknown key %q in %s", e.Key, where)
	if e.Suggestion != "" {
		s += fmt.Sprintf(" (did you mean %q?)", e.Suggestion)
	}
	return s
}

func (t *fileTree) unknown(full string) error {
	return &UnknownKeyError{File: t.path, Line: t.lines[full], Key: full, Suggestion: nearestKey(full)}
}

func joinKey(prefix, name string) string {
	if prefix == "" {
		return name
	}
	return prefix + "." + name
}

// describe names a decoded value's kind for error messages.
func describe(v any) string {
	switch t := v.(type) {
	case nil:
		return "an empty value"
	case map[string]any:
		return "a mapping"
	case []any:
		return "a list"
	case string:
		return strconv.Quote(t)
	case bool:
		return strconv.FormatBool(t)
	default:
		return fmt.Sprint(t)
	}
}

// joinList turns a file's list of strings into the comma-separated form a
// list key's field holds (the flag and environment form).
func joinList(list []any) (string, error) {
	parts := make([]string, len(list))
	for i, e := range list {
		s, ok := e.(string)
		if !ok {
			return "", fmt.Errorf("entry %d: expected a string, not %s", i+1, describe(e))
		}
		if strings.Contains(s, ",") {
			return "", fmt.Errorf("entry %d: %q holds a comma: write one URL per entry", i+1, s)
		}
		parts[i] = strings.TrimSpace(s)
	}
	return strings.Join(parts, ","), nil
}

// yamlChild is the value node of a dotted key under the mapping n, or nil.
func yamlChild(n *yaml.Node, dotted string) *yaml.Node {
	for _, part := range strings.Split(dotted, ".") {
		if n.Kind != yaml.MappingNode {
			return nil
		}
		var next *yaml.Node
		for i := 0; i+1 < len(n.Content); i += 2 {
			if n.Content[i].Value == part {
				next = n.Content[i+1]
			}
		}
		if next == nil {
			return nil
		}
		n = next
	}
	return n
}

// yamlJSON writes a YAML value as JSON, mappings' keys in the order
// written. Aliases are followed to a bounded depth (aliases of aliases make
// a small file describe an exponentially large tree).
func yamlJSON(n *yaml.Node, depth int) ([]byte, error) {
	if depth > 64 {
		return nil, errors.New("nested too deeply (or through too many aliases)")
	}
	var b bytes.Buffer
	switch n.Kind {
	case yaml.AliasNode:
		return yamlJSON(n.Alias, depth+1)
	case yaml.MappingNode:
		b.WriteByte('{')
		for i := 0; i+1 < len(n.Content); i += 2 {
			if i > 0 {
				b.WriteByte(',')
			}
			k, err := json.Marshal(n.Content[i].Value)
			if err != nil {
				return nil, err
			}
			b.Write(k)
			b.WriteByte(':')
			v, err := yamlJSON(n.Content[i+1], depth+1)
			if err != nil {
				return nil, err
			}
			b.Write(v)
		}
		b.WriteByte('}')
	case yaml.SequenceNode:
		b.WriteByte('[')
		for i, e := range n.Content {
			if i > 0 {
				b.WriteByte(',')
			}
			v, err := yamlJSON(e, depth+1)
			if err != nil {
				return nil, err
			}
			b.Write(v)
		}
		b.WriteByte(']')
	default:
		var v any
		if err := n.Decode(&v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		enc := json.NewEncoder(&b)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return nil, fmt.Errorf("line %d: %w", n.Line, err)
		}
		b.Truncate(b.Len() - 1)
	}
	return b.Bytes(), nil
}
