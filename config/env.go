package config

import (
	"fmt"
	"sort"
	"strings"
)

// UnknownEnvError is a SYNTHGEN_* environment variable that names no config
// key: Load ignores it (viper reads only the keys' own variables), so a
// typo such as SYNTHGEN_CONCURENCY would otherwise change nothing, silently.
type UnknownEnvError struct {
	Name       string // SYNTHGEN_CONCURENCY
	Suggestion string // the nearest variable that is read, or ""
}

func (e *UnknownEnvError) Error() string {
	s := fmt.Sprintf("environment variable %s names no config key and is ignored", e.Name)
	if e.Suggestion != "" {
		s += fmt.Sprintf(" (did you mean %s?)", e.Suggestion)
	}
	return s
}

// testPrefix names the test suite's variables, which are not settings.
const testPrefix = envPrefix + "_TEST_"

// UnknownEnv returns, sorted by name, the variables of environ ("NAME=value",
// as os.Environ gives them) that start with SYNTHGEN_ and are neither a
// key's variable (EnvName) nor one of others: the names read elsewhere
// (SYNTHGEN_CACHE_DIR, the variable endpoint.api_key_env names, ...).
// SYNTHGEN_TEST_* are the test suite's own (a chaos seed, where DuckDB is),
// set in CI beside every run the tests make.
func UnknownEnv(environ []string, others ...string) []*UnknownEnvError {
	known := map[string]bool{}
	var names []string
	for _, k := range keys {
		known[EnvName(k.name)] = true
		names = append(names, EnvName(k.name))
	}
	for _, o := range others {
		if o != "" && !known[o] {
			known[o] = true
			names = append(names, o)
		}
	}
	var out []*UnknownEnvError
	for _, kv := range environ {
		name, _, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(name, envPrefix+"_") || strings.HasPrefix(name, testPrefix) || known[name] {
			continue
		}
		out = append(out, &UnknownEnvError{Name: name, Suggestion: nearestEnv(name, names)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name < out[j].Name })
	return out
}

// nearestEnv is the variable of names closest to name. The comparison is
// over the lowercased names without the prefix, so that the rule for keys
// applies (SYNTHGEN_MAX_TOKENS finds SYNTHGEN_GENERATION_MAX_TOKENS as
// max_tokens finds generation.max_tokens).
func nearestEnv(name string, names []string) string {
	strip := func(n string) string {
		return strings.ToLower(strings.TrimPrefix(n, envPrefix+"_"))
	}
	cands := make([]string, len(names))
	back := map[string]string{}
	for i, n := range names {
		cands[i] = strip(n)
		if _, dup := back[cands[i]]; !dup {
			back[cands[i]] = n
		}
	}
	if best := Nearest(strip(name), cands); best != "" {
		return back[best]
	}
	return ""
}
