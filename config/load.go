package config

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"github.com/spf13/viper"
)

// Load builds the effective Config and validates it. Each key takes the
// first of: a flag in fs that the user set (fs.Changed), its SYNTHGEN_*
// environment variable (SYNTHGEN_ENDPOINT_BASE_URL), the file, the default.
// file "" means no file; fs may be nil and may hold flags that are not
// config keys (--config, --force, ...): those are ignored. Errors name
// where the bad value came from: "my.yaml:7: output.format: ...",
// "env SYNTHGEN_CONCURRENCY: concurrency: ...", "flag --dataset.limit: ...".
func Load(fs *pflag.FlagSet, file string) (Config, error) {
	cfg, _, err := LoadWithSources(fs, file)
	return cfg, err
}

// Sources records, as Load takes each key, where its value came from:
// "flag --generation.temperature", "env SYNTHGEN_GENERATION_TEMPERATURE",
// "job.yaml:7". A key none of them set is absent: its default applies.
type Sources map[string]string

// Of names where key's value came from, or "the default".
func (s Sources) Of(key string) string {
	if w := s[key]; w != "" {
		return w
	}
	return "the default"
}

// LoadWithSources is Load, with where each key's value came from.
func LoadWithSources(fs *pflag.FlagSet, file string) (Config, Sources, error) {
	var tree *fileTree
	if file != "" {
		t, err := readFile(file)
		if err != nil {
			return Config{}, nil, err
		}
		tree = t
	}

	v := viper.New()
	v.SetEnvPrefix(envPrefix)
	v.SetEnvKeyReplacer(strings.NewReplacer(".", "_"))
	def := Default()
	for _, k := range keys {
		if handLoaded[k.name] {
			continue // see loadExtraBody, loadPromptMessages
		}
		// A default for every key, so viper knows them all.
		v.SetDefault(k.name, defaultValue(k.field(&def)))
		// One binding per key rather than AutomaticEnv: with AutomaticEnv an
		// unrelated SYNTHGEN_OUTPUT variable would hide every output.* key.
		if err := v.BindEnv(k.name); err != nil {
			return Config{}, nil, fmt.Errorf("bind env %s: %w", EnvName(k.name), err)
		}
		if f := lookupFlag(fs, k.name); f != nil {
			if err := v.BindPFlag(k.name, f); err != nil {
				return Config{}, nil, fmt.Errorf("bind flag --%s: %w", k.name, err)
			}
		}
	}
	if tree != nil {
		if err := v.MergeConfigMap(viperTree(tree)); err != nil {
			return Config{}, nil, fmt.Errorf("%s: %w", file, err)
		}
	}

	src := sources{fs: fs, tree: tree}
	cfg := Default()
	from := Sources{}
	var errs []error
	for _, k := range keys {
		if w := src.of(k.name); w != "" {
			from[k.name] = w
		}
		var raw any
		var err error
		switch k.name {
		case extraBodyKey:
			raw, cfg.Generation.ExtraBody, err = loadExtraBody(fs, tree)
		case promptMessagesKey:
			raw, cfg.Prompt.Messages, err = loadPromptMessages(fs, tree)
		default:
			raw = v.Get(k.name)
			err = assign(k.field(&cfg), raw)
		}
		if err != nil {
			errs = append(errs, src.annotate(&FieldError{Key: k.name, Value: raw, Reason: err.Error()}))
		}
	}
	if len(errs) > 0 {
		return Config{}, nil, errors.Join(errs...)
	}
	if err := cfg.Validate(); err != nil {
		return Config{}, nil, src.annotateAll(err)
	}
	return cfg, from, nil
}

func lookupFlag(fs *pflag.FlagSet, name string) *pflag.Flag {
	if fs == nil {
		return nil
	}
	return fs.Lookup(name)
}

// defaultValue is a key's default as viper holds it.
func defaultValue(p any) any {
	switch p := p.(type) {
	case *string:
		return *p
	case *int:
		return *p
	case *int64:
		return *p
	case *float64:
		return *p
	case *bool:
		return *p
	case *time.Duration:
		return p.String()
	case *concurrencyValue:
		return p.value()
	case *ResponseFormat:
		return p.Value
	case *Price:
		return p.Value
	}
	return nil
}

// viperTree copies only the file's known scalar keys for viper. Leaving out
// extra_body keeps viper from lowercasing the request fields inside it.
func viperTree(t *fileTree) map[string]any {
	out := map[string]any{}
	for _, k := range keys {
		if handLoaded[k.name] {
			continue
		}
		if val, ok := t.lookup(k.name); ok {
			setNested(out, k.name, val)
		}
	}
	return out
}

// loadExtraBody applies the same precedence as viper does for the other
// keys, by hand: flag and environment carry a JSON object string, the file a
// mapping taken with its keys as written.
func loadExtraBody(fs *pflag.FlagSet, tree *fileTree) (raw any, body map[string]any, err error) {
	if f := lookupFlag(fs, extraBodyKey); f != nil && f.Changed {
		s := f.Value.String()
		body, err = jsonObject(s)
		return s, body, err
	}
	if s, ok := os.LookupEnv(EnvName(extraBodyKey)); ok && s != "" {
		body, err = jsonObject(s)
		return s, body, err
	}
	if val, ok := tree.lookup(extraBodyKey); ok {
		// The file check has already made sure it is a mapping.
		if m, ok := val.(map[string]any); ok {
			return m, m, nil
		}
	}
	return nil, map[string]any{}, nil
}

// sources says where a key's effective value came from, for error messages.
type sources struct {
	fs   *pflag.FlagSet
	tree *fileTree
}

// of names the source of key, with the precedence Load uses, or "" for the
// default.
func (s sources) of(key string) string {
	if f := lookupFlag(s.fs, key); f != nil && f.Changed {
		return "flag --" + key
	}
	if v, ok := os.LookupEnv(EnvName(key)); ok && v != "" {
		return "env " + EnvName(key)
	}
	if _, ok := s.tree.lookup(key); ok {
		return s.tree.where(key)
	}
	return ""
}

// annotate prefixes a field error with the source of its key, or of a
// related key when the key itself was left at its default (a prompt_field
// required because the file set format: prompt names the file).
func (s sources) annotate(fe *FieldError) error {
	for _, k := range append([]string{fe.Key}, fe.related...) {
		if src := s.of(k); src != "" {
			return fmt.Errorf("%s: %w", src, fe)
		}
	}
	return fe
}

func (s sources) annotateAll(err error) error {
	var list []error
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		list = j.Unwrap()
	} else {
		list = []error{err}
	}
	out := make([]error, 0, len(list))
	for _, e := range list {
		if fe, ok := e.(*FieldError); ok {
			out = append(out, s.annotate(fe))
		} else {
			out = append(out, e)
		}
	}
	if len(out) == 1 {
		return out[0]
	}
	return errors.Join(out...)
}

// assign converts one raw value (from a file, an env string, or a flag via
// viper) to the field's type. It is strict where viper's casts are loose:
// "abc" is not 0, 1.5 is not an int, and a bare 30 is not 30ns.
func assign(dst, raw any) error {
	if raw == nil {
		return errors.New("no value")
	}
	switch p := dst.(type) {
	case *string:
		s, err := toString(raw)
		*p = s
		return err
	case *int:
		n, err := toInt(raw)
		if err == nil && (n > math.MaxInt || n < math.MinInt) {
			err = fmt.Errorf("%d is out of range", n)
		}
		*p = int(n)
		return err
	case *int64:
		n, err := toInt(raw)
		*p = n
		return err
	case *float64:
		f, err := toFloat(raw)
		*p = f
		return err
	case *bool:
		b, err := toBool(raw)
		*p = b
		return err
	case *time.Duration:
		d, err := toDuration(raw)
		*p = d
		return err
	case *concurrencyValue:
		return p.assign(raw)
	case *ResponseFormat:
		return p.assign(raw)
	case *Price:
		return p.assign(raw)
	}
	return fmt.Errorf("unsupported field type %T", dst)
}

func toString(raw any) (string, error) {
	switch t := raw.(type) {
	case string:
		return t, nil
	case json.Number:
		return t.String(), nil
	case bool:
		return strconv.FormatBool(t), nil
	case int, int64, uint64:
		return fmt.Sprint(t), nil
	case float64:
		return strconv.FormatFloat(t, 'g', -1, 64), nil
	}
	return "", fmt.Errorf("expected a string, not %s", describe(raw))
}

func toInt(raw any) (int64, error) {
	switch t := raw.(type) {
	case int:
		return int64(t), nil
	case int64:
		return t, nil
	case uint64:
		if t > math.MaxInt64 {
			return 0, fmt.Errorf("%d is out of range", t)
		}
		return int64(t), nil
	case float64:
		return floatToInt(t)
	case json.Number:
		if n, err := t.Int64(); err == nil {
			return n, nil
		}
		f, err := t.Float64()
		if err != nil {
			return 0, fmt.Errorf("%s is not an integer", t)
		}
		return floatToInt(f)
	case string:
		n, err := strconv.ParseInt(strings.TrimSpace(t), 10, 64)
		if err != nil {
			if errors.Is(err, strconv.ErrRange) {
				return 0, fmt.Errorf("%q is out of range", t)
			}
			return 0, fmt.Errorf("%q is not an integer", t)
		}
		return n, nil
	}
	return 0, fmt.Errorf("expected an integer, not %s", describe(raw))
}

func floatToInt(f float64) (int64, error) {
	if f != math.Trunc(f) || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, fmt.Errorf("%v is not an integer", f)
	}
	if f >= math.MaxInt64 || f < math.MinInt64 {
		return 0, fmt.Errorf("%v is out of range", f)
	}
	return int64(f), nil
}

func toFloat(raw any) (float64, error) {
	var f float64
	switch t := raw.(type) {
	case int:
		f = float64(t)
	case int64:
		f = float64(t)
	case uint64:
		f = float64(t)
	case float64:
		f = t
	case json.Number:
		v, err := t.Float64()
		if err != nil {
			return 0, fmt.Errorf("%s is not a number", t)
		}
		f = v
	case string:
		v, err := strconv.ParseFloat(strings.TrimSpace(t), 64)
		if err != nil && !errors.Is(err, strconv.ErrRange) {
			return 0, fmt.Errorf("%q is not a number", t)
		}
		f = v
	default:
		return 0, fmt.Errorf("expected a number, not %s", describe(raw))
	}
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, fmt.Errorf("%v is not a finite number", raw)
	}
	return f, nil
}

func toBool(raw any) (bool, error) {
	switch t := raw.(type) {
	case bool:
		return t, nil
	case string:
		b, err := strconv.ParseBool(strings.TrimSpace(t))
		if err != nil {
			return false, fmt.Errorf("%q is not true or false", t)
		}
		return b, nil
	}
	return false, fmt.Errorf("expected true or false, not %s", describe(raw))
}

// toDuration takes "30m", "1s", "1h30m". A bare number other than 0 is
// refused: viper would read `timeout: 30` as 30 nanoseconds.
func toDuration(raw any) (time.Duration, error) {
	switch t := raw.(type) {
	case string:
		s := strings.TrimSpace(t)
		d, err := time.ParseDuration(s)
		if err == nil {
			return d, nil
		}
		if _, nerr := strconv.ParseFloat(s, 64); nerr == nil {
			return 0, fmt.Errorf("%q has no unit: write e.g. \"%ss\" or \"%sm\"", t, s, s)
		}
		return 0, fmt.Errorf("%q is not a duration such as \"30s\", \"5m\" or \"1h30m\"", t)
	case int, int64, uint64, float64, json.Number:
		if f, err := toFloat(t); err == nil && f == 0 {
			return 0, nil
		}
		return 0, fmt.Errorf("%v has no unit: write e.g. \"%vs\" or \"%vm\"", t, t, t)
	}
	return 0, fmt.Errorf("expected a duration such as \"30s\", not %s", describe(raw))
}
