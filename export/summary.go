package export

import (
	"fmt"
	"io"
	"strings"

	"github.com/synthgen/synthgen/internal/human"
)

// WriteText says for a person what was read from ndirs directories,
// written and dropped (cmd writes it on stderr, whose errors it ignores:
// the export is done).
func (s *Summary) WriteText(w io.Writer, ndirs int) {
	where := s.Out
	if where == "-" {
		where = "stdout"
	}
	fmt.Fprintf(w, "export: %s read from %s; %s written to %s (%s)\n",
		human.Count(s.Read, "record", "records"), human.Count(int64(ndirs), "directory", "directories"),
		human.Count(s.Exported, "row", "rows"), where, s.Format)
	for _, f := range s.Filters {
		if !f.Active {
			fmt.Fprintf(w, "  kept     %-10s filter off (%s)\n", f.Name, f.Flag)
			continue
		}
		line := fmt.Sprintf("  dropped  %-10s %s: %s", f.Name, human.Num(f.Dropped), f.Rule)
		if f.Flag != "" && f.Dropped > 0 {
			line += "; keep them with " + f.Flag
		}
		fmt.Fprintln(w, line)
	}
	if s.Failed > 0 {
		what := "not exported (rerun with --retry-errors to ask them again)"
		if s.ErrorLines > 0 {
			what = "written as error lines"
		}
		fmt.Fprintf(w, "  failed   %s failed for good, %s\n", human.Count(s.Failed, "request", "requests"), what)
	}
	if s.ToolCalls > 0 || s.Diverged > 0 {
		fmt.Fprintf(w, "  tools    %s; %s left the row's conversation and end at the generation that left it\n",
			human.Count(s.ToolCalls, "call", "calls"), human.Count(s.Diverged, "conversation", "conversations"))
	}
	if s.HiddenLinked > 0 || s.HiddenCopied > 0 {
		fmt.Fprintf(w, "  hidden   %s hard-linked, %s copied (another file system) into hidden_states/\n",
			human.Count(s.HiddenLinked, "file", "files"), human.Num(s.HiddenCopied))
	}
	if len(s.NoHidden) > 0 {
		fmt.Fprintf(w, "  no file  rows without a kept hidden-state file: %s", strings.Join(s.NoHidden, ", "))
		if n := s.dropped(FilterHiddenStates); n > int64(len(s.NoHidden)) {
			fmt.Fprintf(w, " and %s more", human.Num(n-int64(len(s.NoHidden))))
		}
		fmt.Fprintln(w)
	}
	pm, cm := s.Mean()
	fmt.Fprintf(w, "  tokens   prompt %s (mean %.0f), completion %s (mean %.0f, p50 %d, p90 %d)\n",
		human.Num(s.PromptTokens), pm, human.Num(s.CompletionTokens), cm, s.CompletionP50, s.CompletionP90)
	if len(s.Files) > 1 {
		fmt.Fprintf(w, "  files    %s\n", strings.Join(s.Files, ", "))
	}
}

// dropped is what the filter name dropped, 0 when it is not one of s's.
func (s *Summary) dropped(name string) int64 {
	for _, f := range s.Filters {
		if f.Name == name {
			return f.Dropped
		}
	}
	return 0
}
