package main

// synthgen view DIR...: a local web page that plots a run and browses its
// answers (ui/view), or with --html one self-contained file of it.
// This file holds the flags, the address policy (loopback unless --public,
// and then a token) and the serving loop.

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"runtime/debug"
	"strings"
	"syscall"
	"time"

	"github.com/dustin/go-humanize"
	"github.com/spf13/cobra"

	"github.com/synthgen/synthgen/sink/layout"
	"github.com/synthgen/synthgen/ui/view"
)

// defaultViewAddr is where view listens without --addr: loopback, on a
// port fixed so that `ssh -L 8765:127.0.0.1:8765 gpu-box` reaches it.
const defaultViewAddr = "127.0.0.1:8765"

// viewMemoryLimit is the soft limit of the Go runtime's memory in view
// (runtime/debug.SetMemoryLimit), the index not included.
const viewMemoryLimit = 32 << 20

// viewFlags are view's flags.
type viewFlags struct {
	addr, html        string
	public, overwrite bool
}

func newViewCmd() *cobra.Command {
	var o viewFlags
	cmd := &cobra.Command{
		Use:   "view DIR... [--addr HOST:PORT [--public]] [--html FILE]",
		Short: "See a run and its answers: a local web page of plots and records, or one static HTML file",
		Long:  viewHelp,
		Example: `  synthgen view out/run
  synthgen view out/shard-0 out/shard-1 --addr 127.0.0.1:0
  synthgen view out/run --addr 0.0.0.0:8765 --public
  synthgen view out/run --html run-report.html`,
		Args: func(_ *cobra.Command, args []string) error {
			if len(args) == 0 {
				return usageError(errors.New("view: no DIR given"), "see 'synthgen view --help'")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, dirs []string) error { return runView(cmd, dirs, o) },
	}
	fs := cmd.Flags()
	fs.SortFlags = false
	fs.StringVar(&o.addr, "addr", defaultViewAddr, "HOST:PORT to listen on; loopback only unless --public; port 0 picks a free one")
	fs.BoolVar(&o.public, "public", false, "allow a non-loopback --addr; every URL then needs the random token printed with it")
	fs.StringVar(&o.html, "html", "", "write one self-contained HTML report to FILE (outside every DIR) instead of serving")
	fs.BoolVar(&o.overwrite, "overwrite", false, "with --html: replace FILE if it exists")
	return cmd
}

// runView serves dirs' page, or writes its report with --html.
func runView(cmd *cobra.Command, dirs []string, o viewFlags) error {
	// The index lives outside the Go heap; what the heap holds is
	// records being read and selections being sorted, garbage
	// soon: a soft limit makes the collector return it to the
	// system rather than let it grow to twice the live heap.
	debug.SetMemoryLimit(viewMemoryLimit)
	for _, d := range dirs {
		if err := view.CheckDir(d); err != nil {
			return usageError(err, "give the output.dir of a run")
		}
	}
	ctx, stop := signal.NotifyContext(cmd.Context(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if o.html != "" {
		if cmd.Flags().Changed("addr") || o.public {
			return usageError(errors.New("view: --html writes a file and serves nothing: --addr and --public do not go with it"), "see 'synthgen view --help'")
		}
		return writeViewReport(ctx, dirs, o.html, o.overwrite, cmd.ErrOrStderr())
	}
	if o.overwrite {
		return usageError(errors.New("view: --overwrite goes with --html"), "see 'synthgen view --help'")
	}
	token := ""
	if err := checkViewAddr(o.addr, o.public); err != nil {
		return usageError(err, "listen on 127.0.0.1 and use an SSH tunnel, or add --public (the URL then carries a token)")
	}
	if o.public {
		token = newToken()
	}
	return serveView(ctx, dirs, o.addr, token, cmd.OutOrStdout(), cmd.ErrOrStderr())
}

// viewHelp is view --help's text.
const viewHelp = `view serves a web page about one or several output directories (the --shard i/n
directories of one job too) and prints its URL. It only reads the directories,
and works while a run is writing them (what is finalized, and the live run's
progress) as well as after.

The run page plots the history of the run (DIR/history.jsonl, one point per
progress interval): the client's tok/s and req/s beside the server's, requests
in flight and the concurrency limit (concurrency: auto's moves marked), the
server's KV cache use, queue and preemptions, errors and retries by cause, each
endpoint's share; each run of a resumed job and each server outage is marked on
the time axis. It shows status.json or report.json as the run wrote them, the
runs of manifest.json and the job's config, and the distributions of the
records on disk: completion tokens (max_tokens marked), reasoning and content
lengths, latency, time to first token, finish reasons.

The records page is a table of every record (id, sample, the first words of
its prompt and its answer, source, tokens, finish reason, latency), paged, with filters (truncated, empty reasoning, think
tags in content, errors, a completion-token range, a finish reason), sorting by
length or latency, and a text search of content and reasoning that shows
matches as they are found (at most 200). A record's page (/record?id=ID&sample=N,
or /record/ID) shows the messages as sent, reasoning and content side by side, every turn of a whole conversation,
the token figures and the key's error history. Every byte of a record is shown
as text: nothing in it runs as markup or script.

The records are indexed once, at the first page that needs them (progress is
shown), in about 40 bytes a record; a page reads its records from the shards.

Flags:
  --addr HOST:PORT  where to listen (default ` + defaultViewAddr + `); port 0 picks a free one.
                    Only loopback addresses (127.0.0.1, ::1, localhost) are
                    accepted unless --public. To look from another machine,
                    prefer an SSH tunnel: ssh -L 8765:127.0.0.1:8765 gpu-box
  --public          allow a non-loopback --addr (such as 0.0.0.0:8765): anyone who
                    can reach it sees the records, so the printed URL carries a
                    random token, and a request without it is refused
  --html FILE       write the run page as one self-contained HTML file instead of
                    serving: the plots, the figures, the job and a few records of
                    each finish reason, opened from disk with no server and no
                    network (for a run under nohup: copy the file off the box).
                    FILE may not be inside a DIR (links resolved): view never
                    writes there. An existing FILE is kept unless --overwrite;
                    the report is written beside it and renamed into place.
  --overwrite       with --html: replace FILE if it exists

Stop the server with Ctrl-C. Exit status: 0, 2 for bad flags or a DIR that is
not an output directory, 1 when the address cannot be listened on or the
report cannot be written.`

// checkViewAddr refuses an address that is not loopback, unless public.
func checkViewAddr(addr string, public bool) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("view: --addr %q: %w", addr, err)
	}
	if public || isLoopback(host) {
		return nil
	}
	shown := host
	if shown == "" {
		shown = "every interface"
	}
	return fmt.Errorf("view: --addr %s listens on %s, not loopback: anyone who reaches it would read the records", addr, shown)
}

// isLoopback reports whether host names only this machine.
func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// newToken is 128 random bits, hex.
func newToken() string {
	b := make([]byte, 16)
	_, _ = rand.Read(b) // crypto/rand.Read does not fail (it panics where the kernel cannot give randomness)
	return hex.EncodeToString(b)
}

// serveView serves the view of dirs on addr until ctx ends.
func serveView(ctx context.Context, dirs []string, addr, token string, stdout, stderr io.Writer) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		hint := ""
		if errors.Is(err, syscall.EADDRINUSE) {
			hint = "another view may be serving there; --addr 127.0.0.1:0 picks a free port"
		}
		return &exitError{code: exitFailure, err: fmt.Errorf("view: listen: %w", err), hint: hint}
	}
	o := view.Options{Dirs: dirs, Token: token}
	if token == "" {
		o.Hosts = view.LoopbackHosts(ln.Addr())
	}
	s, err := view.NewServer(o)
	if err != nil {
		_ = ln.Close()
		return usageError(err, "give the output.dir of a run")
	}
	defer s.Close()
	url := "http://" + ln.Addr().String() + "/"
	if token != "" {
		host := ln.Addr().(*net.TCPAddr)
		shown := host.String()
		if host.IP.IsUnspecified() {
			if name, err := os.Hostname(); err == nil {
				shown = net.JoinHostPort(name, fmt.Sprint(host.Port))
			}
		}
		url = "http://" + shown + "/?token=" + token
	}
	fmt.Fprintf(stdout, "view: %s (%s; Ctrl-C to stop)\n", url, strings.Join(dirs, ", "))
	go reportIndex(ctx, s.Index(), stderr)

	srv := &http.Server{Handler: s, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	select {
	case err := <-done:
		return &exitError{code: exitFailure, err: fmt.Errorf("view: %w", err)}
	case <-ctx.Done():
	}
	// A search streaming to a page that stays open would hold Shutdown:
	// it gets a moment, then the connections are closed.
	sctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		_ = srv.Close()
	}
	<-done
	return nil
}

// reportIndex says on stderr when the index was built, and how long it took.
func reportIndex(ctx context.Context, ix *view.Index, stderr io.Writer) {
	if err := ix.WaitBuilt(ctx); err != nil {
		return
	}
	p := ix.Progress()
	if p.Error != "" {
		fmt.Fprintf(stderr, "view: index: %s\n", p.Error)
		return
	}
	fmt.Fprintf(stderr, "view: indexed %s (%s) in %s\n", pluralNum(p.Records, "record", "records"), humanize.IBytes(uint64(max(p.Bytes, 0))), p.Took.Round(time.Millisecond))
}

// writeViewReport writes the static report of dirs to path (see
// reportPath).
func writeViewReport(ctx context.Context, dirs []string, path string, overwrite bool, stderr io.Writer) error {
	real, err := reportPath(path, dirs, overwrite)
	if err != nil {
		return err
	}
	last := time.Now()
	n, err := view.WriteReport(ctx, view.ReportOptions{Dirs: dirs, Out: real, Progress: func(p view.Progress) {
		if time.Since(last) >= 5*time.Second {
			last = time.Now()
			fmt.Fprintf(stderr, "view: indexing %.0f%% (%s)\n", p.Percent(), pluralNum(p.Records, "record", "records"))
		}
	}})
	if err != nil {
		return &exitError{code: exitFailure, err: fmt.Errorf("view: --html: %w", err), hint: "nothing was written to " + path}
	}
	fmt.Fprintf(stderr, "view: wrote %s (%s): it opens from disk in a browser, with no server\n", path, humanize.IBytes(uint64(n)))
	return nil
}

// reportPath is the file --html path names, its links resolved: the
// path the checks are about is the one written. It refuses a path inside
// a DIR or any other output directory (however it is spelled: a link to
// the directory, or to a file in it), a directory, and an existing file
// unless overwrite, as export refuses its --out.
func reportPath(path string, dirs []string, overwrite bool) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", usageError(fmt.Errorf("view: --html %s: %w", path, err), "")
	}
	// A link (to a file or not yet one) is followed; a file that does not
	// exist is resolved by its directory.
	real, err := filepath.EvalSymlinks(abs)
	if errors.Is(err, fs.ErrNotExist) {
		target := abs
		if t, lerr := os.Readlink(abs); lerr == nil { // a link to a file not yet written
			if !filepath.IsAbs(t) {
				t = filepath.Join(filepath.Dir(abs), t)
			}
			target = t
		}
		var dir string
		if dir, err = filepath.EvalSymlinks(filepath.Dir(target)); err == nil {
			real = filepath.Join(dir, filepath.Base(target))
		}
	}
	if err != nil {
		return "", usageError(fmt.Errorf("view: --html %s: %w", path, err), "give a file in an existing directory")
	}
	inside := layout.DirAbove(real)
	for _, d := range dirs {
		if rd, err := filepath.EvalSymlinks(d); err == nil && layout.Within(real, rd) {
			inside = d
		}
	}
	if inside != "" {
		return "", usageError(fmt.Errorf("view: --html %s is inside %s: view never writes into an output directory", path, inside),
			"write the report beside the directory, e.g. --html "+filepath.Base(filepath.Clean(inside))+"-report.html")
	}
	st, err := os.Stat(real)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return real, nil
	case err != nil:
		return "", usageError(fmt.Errorf("view: --html %s: %w", path, err), "")
	case st.IsDir():
		return "", usageError(fmt.Errorf("view: --html %s is a directory", path), "give the path of a file, e.g. "+filepath.Join(path, "report.html"))
	case !overwrite:
		return "", usageError(fmt.Errorf("view: --html %s exists", path), "pass --overwrite to replace it, or give another path")
	}
	return real, nil
}
