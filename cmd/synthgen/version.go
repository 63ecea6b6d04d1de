package main

import (
	"fmt"
	"io"
	"regexp"
	"runtime"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// version names this build in the header, the manifest and report.json. The
// Makefile sets it (-ldflags "-X main.version=..."); otherwise init takes it
// from what the go command embedded (buildVersion), so a binary from a plain
// `go build` or `go install` still says which code it is.
var version string

// buildInfo is what the go command embedded; init reads it once.
var buildInfo, haveBuildInfo = debug.ReadBuildInfo()

func init() {
	version = resolveVersion(version, buildInfo, haveBuildInfo)
}

// pseudoVersion matches a Go pseudo-version's time and revision
// (v0.0.0-20250102150405-abcdef123456): a commit, not a release.
var pseudoVersion = regexp.MustCompile(`\d{14}-[0-9a-f]{12}`)

// resolveVersion is the version a build calls itself: the one set with
// -ldflags when there is one; else a release the module was installed at
// (go install ...@v1.2.0); else the commit `go build` stamped from the
// checkout (vcs.revision, shortened, "-dirty" when vcs.modified); else the
// pseudo-version of a go install at a commit; else "dev".
func resolveVersion(ldflags string, info *debug.BuildInfo, ok bool) string {
	if ldflags != "" {
		return ldflags
	}
	if !ok || info == nil {
		return "dev"
	}
	mod := info.Main.Version
	if mod == "(devel)" {
		mod = ""
	}
	if mod != "" && !pseudoVersion.MatchString(mod) {
		return mod
	}
	if rev := buildSetting(info, "vcs.revision"); rev != "" {
		rev = shortRev(rev)
		if buildSetting(info, "vcs.modified") == "true" {
			rev += "-dirty"
		}
		return rev
	}
	if mod != "" {
		return mod
	}
	return "dev"
}

// revLen is how many hex digits name a commit everywhere synthgen shows
// one: the header, the manifest, report.json, `synthgen version` and the
// Makefile's git describe --abbrev=12, as a Go pseudo-version does.
const revLen = 12

func shortRev(rev string) string {
	if len(rev) > revLen {
		return rev[:revLen]
	}
	return rev
}

func buildSetting(info *debug.BuildInfo, key string) string {
	for _, s := range info.Settings {
		if s.Key == key {
			return s.Value
		}
	}
	return ""
}

// versionText is what `synthgen version` and `synthgen --version` print: the
// version, then the commit it was built from when known, and the toolchain.
func versionText() string { return versionTextOf(version, buildInfo, haveBuildInfo) }

func versionTextOf(version string, info *debug.BuildInfo, ok bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "synthgen %s\n", version)
	if ok && info != nil {
		if rev := buildSetting(info, "vcs.revision"); rev != "" {
			fmt.Fprintf(&b, "commit   %s", shortRev(rev))
			if t := buildSetting(info, "vcs.time"); t != "" {
				fmt.Fprintf(&b, " (%s)", t)
			}
			if buildSetting(info, "vcs.modified") == "true" {
				b.WriteString(", with uncommitted changes")
			}
			b.WriteString("\n")
		}
		if m := info.Main; m.Path != "" && m.Version != "" && m.Version != "(devel)" {
			fmt.Fprintf(&b, "module   %s %s\n", m.Path, m.Version)
		}
	}
	fmt.Fprintf(&b, "go       %s %s/%s\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
	return b.String()
}

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print synthgen's version, the commit it was built from and the Go toolchain",
		Long: `version prints the version this binary calls itself in its header, in
DIR/manifest.json and in DIR/report.json: the Makefile's (git describe), else
the release it was installed at (go install ...@v1.2.0), else the commit a
plain 'go build' in a checkout recorded ("-dirty": with uncommitted changes).`,
		Args: noArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := io.WriteString(cmd.OutOrStdout(), versionText())
			return err
		},
	}
}
