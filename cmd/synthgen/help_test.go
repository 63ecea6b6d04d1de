package main

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/synthgen/synthgen/config"
)

// walkCommands calls fn for c and every command below it.
func walkCommands(c *cobra.Command, fn func(*cobra.Command)) {
	fn(c)
	for _, sub := range c.Commands() {
		walkCommands(sub, fn)
	}
}

// TestHelpIsComplete: --help is the manual a person on the GPU box has, so
// every command says what it does, the ones people run say how (an
// example or a long description), and every flag says what it is for.
func TestHelpIsComplete(t *testing.T) {
	root := newRootCmd()
	// cobra adds these on Execute; adding them here checks what --help
	// really shows.
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	seen := map[string]bool{}
	walkCommands(root, func(c *cobra.Command) {
		c.InitDefaultHelpFlag()
		path := c.CommandPath()
		seen[c.Name()] = true
		if strings.TrimSpace(c.Short) == "" {
			t.Errorf("%s: no Short description", path)
		}
		for _, fs := range []*pflag.FlagSet{c.Flags(), c.PersistentFlags()} {
			fs.VisitAll(func(f *pflag.Flag) {
				if strings.TrimSpace(f.Usage) == "" {
					t.Errorf("%s --%s: no usage text", path, f.Name)
				}
			})
		}
	})
	for _, name := range []string{"run", "watch", "inspect", "mock"} {
		if !seen[name] {
			t.Errorf("synthgen %s: not a command", name)
			continue
		}
		c, _, err := root.Find([]string{name})
		if err != nil {
			t.Errorf("find %s: %v", name, err)
			continue
		}
		if strings.TrimSpace(c.Example) == "" && strings.TrimSpace(c.Long) == "" {
			t.Errorf("%s: neither Example nor Long", c.CommandPath())
		}
	}
}

// TestRunHelpListsEveryConfigKey: every config key is a flag of run with
// its dotted name, and `synthgen run --help` shows it.
func TestRunHelpListsEveryConfigKey(t *testing.T) {
	var out, errOut cliBuffer
	cmd := newRootCmd()
	cmd.SetArgs([]string{"run", "--help"})
	cmd.SetOut(&out)
	cmd.SetErr(&errOut)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatalf("run --help: %v", err)
	}
	help := out.String()
	if !strings.Contains(help, "synthgen run") {
		t.Fatalf("run --help printed no usage on stdout; stdout:\n%s\nstderr:\n%s", help, errOut.String())
	}
	keys := config.Keys()
	if len(keys) == 0 {
		t.Fatal("config.Keys() is empty")
	}
	// "--key type   usage", or "--key[=true|false]   usage" for a bool; a
	// bare substring would let --output.dir pass for --output.dirs.
	listed := func(flag string) bool {
		return strings.Contains(help, flag+" ") || strings.Contains(help, flag+"[=")
	}
	for _, k := range keys {
		if !listed("--" + k) {
			t.Errorf("run --help does not list --%s", k)
		}
	}
	for _, f := range []string{"--config", "--force", "--retry-errors", "--shard", "--quiet", "--log-format", "--metrics-addr"} {
		if !listed(f) {
			t.Errorf("run --help does not list %s", f)
		}
	}
}

// Bool flags read as what they are in --help: `--force`, not
// `--force[=true|false]` (pflag's since 1.0.6), and their descriptions in
// the column of the others: the syntax turns into as many spaces (issue 41).
func TestHelpBoolFlagsBare(t *testing.T) {
	for _, args := range [][]string{{"run", "--help"}, {"inspect", "--help"}, {"mock", "--help"}} {
		var out, errOut cliBuffer
		cmd := newRootCmd()
		cmd.SetArgs(args)
		cmd.SetOut(&out)
		cmd.SetErr(&errOut)
		if err := cmd.ExecuteContext(context.Background()); err != nil {
			t.Fatalf("%v: %v", args, err)
		}
		if help := out.String(); strings.Contains(help, boolSyntax) {
			t.Errorf("%v shows %s:\n%s", args, boolSyntax, help)
		}
	}
	var out cliBuffer
	cmd := newRootCmd()
	cmd.SetArgs([]string{"run", "--help"})
	cmd.SetOut(&out)
	if err := cmd.ExecuteContext(context.Background()); err != nil {
		t.Fatal(err)
	}
	col := func(flag, desc string) int {
		for _, line := range strings.Split(out.String(), "\n") {
			if strings.Contains(line, flag+" ") && strings.Contains(line, desc) {
				return strings.Index(line, desc)
			}
		}
		t.Fatalf("no line of %s", flag)
		return 0
	}
	if f, c := col("--force", "resume even though"), col("--config string", "config file"); f != c {
		t.Errorf("--force's description at column %d, --config's at %d", f, c)
	}
}
