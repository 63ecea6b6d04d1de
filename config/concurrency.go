package config

import (
	"fmt"
	"strconv"
	"strings"
)

// DefaultAutoCeiling is the most requests in flight `concurrency: auto`
// allows when no ceiling is written (auto:N sets it).
const DefaultAutoCeiling = 512

// concurrencyValue is the concurrency key's field: Config.Concurrency (a
// fixed number in flight, or the ceiling under auto) and
// Config.ConcurrencyAuto together, read from "200", "auto" or "auto:300".
// As a pflag.Value it is --concurrency.
type concurrencyValue struct {
	n    *int
	auto *bool
}

// ParseConcurrency reads the concurrency key: a positive integer (that many
// requests in flight), "auto" (the server's metrics decide, up to
// DefaultAutoCeiling) or "auto:N" (up to N).
func ParseConcurrency(s string) (n int, auto bool, err error) {
	s = strings.TrimSpace(s)
	rest, isAuto := strings.CutPrefix(s, "auto")
	if isAuto {
		if rest == "" {
			return DefaultAutoCeiling, true, nil
		}
		ceil, ok := strings.CutPrefix(rest, ":")
		if !ok {
			return 0, false, fmt.Errorf("%q is not an integer, auto or auto:N (N: the most in flight)", s)
		}
		c, err := strconv.Atoi(ceil)
		if err != nil || c < 1 {
			return 0, false, fmt.Errorf("%q: the ceiling after auto: must be a positive integer, e.g. auto:512", s)
		}
		return c, true, nil
	}
	c, err := strconv.Atoi(s)
	if err != nil {
		return 0, false, fmt.Errorf("%q is not an integer, auto or auto:N (N: the most in flight)", s)
	}
	return c, false, nil
}

// FormatConcurrency is the key's value as written: "200", "auto:512".
func FormatConcurrency(n int, auto bool) string {
	if auto {
		return "auto:" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

func (v *concurrencyValue) String() string { return FormatConcurrency(*v.n, *v.auto) }

func (v *concurrencyValue) Set(s string) error {
	n, auto, err := ParseConcurrency(s)
	if err != nil {
		return err
	}
	*v.n, *v.auto = n, auto
	return nil
}

func (v *concurrencyValue) Type() string { return "N|auto[:N]" }

// value is the key's value in viper and the manifest: the number when
// fixed (as before auto existed), else "auto:N".
func (v *concurrencyValue) value() any {
	if *v.auto {
		return v.String()
	}
	return *v.n
}

// assign reads raw (a file's number or string, an env or flag string).
func (v *concurrencyValue) assign(raw any) error {
	if s, ok := raw.(string); ok {
		return v.Set(s)
	}
	n, err := toInt(raw)
	if err != nil {
		return fmt.Errorf("%v; write a positive integer, auto or auto:N", err)
	}
	*v.n, *v.auto = int(n), false
	return nil
}
