package main

import (
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/synthgen/synthgen/config"
)

// Exit codes, documented in docs/reference.md: scripts that chain on synthgen read them.
const (
	exitOK          = 0
	exitFailure     = 1   // the run could not go on (I/O, server unreachable, ...)
	exitUsage       = 2   // bad flags, config or input: nothing was started or nothing was lost
	exitIncomplete  = 3   // the run ended, but some requests failed for good (see DIR/errors)
	exitPending     = 4   // inspect, export: the directories are sound, but the job is not done (keys pending or failed)
	exitInterrupted = 130 // stopped by a signal before the dataset was done; rerun to resume
)

// exitError carries an exit code and an optional hint for the person.
type exitError struct {
	code int
	err  error
	hint string
	// asked marks an end the person asked for (a Ctrl-C): main says it as
	// what it is, without "Error:", and keeps the exit code.
	asked bool
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }
func (e *exitError) Hint() string  { return e.hint }

func usageError(err error, hint string) error {
	return &exitError{code: exitUsage, err: err, hint: hint}
}

// askedFor reports whether err is an end the person asked for.
func askedFor(err error) bool {
	var ee *exitError
	return errors.As(err, &ee) && ee.asked
}

func exitCode(err error) int {
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	return exitFailure
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "synthgen",
		Short: "Generate model answers for a dataset of prompts against an OpenAI-compatible server",
		Long: `synthgen sends every prompt of a dataset to an OpenAI-compatible server (vLLM,
SGLang, ...) with a fixed number of requests in flight, records each answer's
reasoning and content into resumable JSONL or Parquet shards, and shows live
req/s, tok/s and average completion length. Stop it at any time (Ctrl-C, kill,
reboot) and run the same command again: it resumes where it was.`,
		Version:       version,
		SilenceUsage:  true,
		SilenceErrors: true,
		// An Args of its own (cobra's default exits 1 on an unknown
		// command) makes a mistyped command a usage error, exit 2; the
		// root then needs a RunE, which shows the help as before.
		Args:                       unknownCommand,
		SuggestionsMinimumDistance: 2,
		RunE:                       func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	root.SetVersionTemplate("{{versionText}}")
	// cobra's usage with pflag's flag lines but for bool flags (flagUsages).
	usage := root.UsageTemplate()
	for _, fs := range []string{".LocalFlags", ".InheritedFlags"} {
		usage = strings.ReplaceAll(usage, fs+".FlagUsages", "flagUsages "+fs)
	}
	root.SetUsageTemplate(usage)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return usageError(suggestFlag(c, err), fmt.Sprintf("see '%s --help'", c.CommandPath()))
	})
	root.AddCommand(newRunCmd(), newMockCmd(), newWatchCmd(), newInspectCmd(), newExportCmd(), newViewCmd(), newVersionCmd())
	return root
}

func init() {
	cobra.AddTemplateFunc("versionText", versionText)
	cobra.AddTemplateFunc("flagUsages", flagUsages)
}

// boolSyntax is what pflag (since 1.0.6) writes after every bool flag's
// name in --help: `--force[=true|false]`, which reads as if the flag took
// a value, while `--force` alone is the way to set it.
const boolSyntax = "[=true|false]"

// flagUsages is fs's flag lines as pflag writes them, each bool flag's
// boolSyntax turned into as many spaces, so the descriptions stay in
// their column.
func flagUsages(fs *pflag.FlagSet) string {
	return strings.ReplaceAll(fs.FlagUsages(), boolSyntax, strings.Repeat(" ", len(boolSyntax)))
}

// unknownCommand refuses a first argument that names no command, with the
// nearest commands (cobra's suggestions: a few edits away or a prefix).
func unknownCommand(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	err := fmt.Errorf("unknown command %q for %q", args[0], c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		err = fmt.Errorf("%w (did you mean %s?)", err, quotedOr(s))
	}
	return usageError(err, fmt.Sprintf("see '%s --help' for the commands", c.CommandPath()))
}

// noArgs is cobra.NoArgs as a usage error (exit 2). A stray "true" or
// "false" is almost always a boolean flag's value given after a space
// (--generation.return_token_ids true), which pflag does not take: that is
// said, with the flag set on the same line.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	hint := fmt.Sprintf("see '%s --help'", c.CommandPath())
	if _, err := strconv.ParseBool(args[0]); err == nil {
		var set []string
		c.Flags().Visit(func(f *pflag.Flag) {
			if f.Value.Type() == "bool" {
				set = append(set, fmt.Sprintf("--%s=%s", f.Name, args[0]))
			}
		})
		err := fmt.Errorf("unexpected argument %q for %q: a boolean flag takes its value as --flag=%s, not after a space (--flag alone is true)", args[0], c.CommandPath(), args[0])
		if len(set) > 0 {
			err = fmt.Errorf("%w; did you mean %s?", err, strings.Join(set, " or "))
		}
		return usageError(err, hint)
	}
	return usageError(fmt.Errorf("unexpected argument %q for %q: it takes none, only flags", args[0], c.CommandPath()), hint)
}

// quotedOr lists names as `"a"`, `"a" or "b"`, `"a", "b" or "c"`.
func quotedOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = fmt.Sprintf("%q", n)
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// suggestFlag adds the nearest flag of c to an unknown flag's error
// (--concurency: did you mean --concurrency?), by the rule the config file's
// unknown keys follow; a long name given one dash (-concurrency) is told
// that it needs two.
func suggestFlag(c *cobra.Command, err error) error {
	var ne *pflag.NotExistError
	if !errors.As(err, &ne) {
		return err
	}
	var names []string
	c.Flags().VisitAll(func(f *pflag.Flag) { names = append(names, f.Name) })
	typed := ne.GetSpecifiedName()
	if group := ne.GetSpecifiedShortnames(); group != "" {
		// -concurrency is read as the shorthands c, o, n, ...
		if c.Flags().Lookup(group) != nil {
			return fmt.Errorf("%w (did you mean --%s? a long flag takes two dashes)", err, group)
		}
		typed = group
	}
	if best := config.Nearest(typed, names); best != "" {
		return fmt.Errorf("%w (did you mean --%s?)", err, best)
	}
	return err
}
