package main

// Child processes: the mock, synthgen and the yardstick, each measured by
// its own rusage.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// usage is what one child cost.
type usage struct {
	wall   time.Duration // launch to exit, as the parent saw it
	cpu    time.Duration // user + system
	maxRSS int64         // bytes
	stdout string
	// instructions the process ran, when valgrind counted them (the
	// instructions scenario); 0 otherwise.
	instructions int64
}

// tail keeps the last bytes written to it: a failed child's message.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 8<<10 {
		t.b = append(t.b[:0], t.b[len(t.b)-4<<10:]...)
	}
	return len(p), nil
}

// run starts cmd, calls started (if not nil) right after the launch with
// the launch time, and waits for it.
func run(cmd *exec.Cmd, started func(time.Time)) (usage, error) {
	var out bytes.Buffer
	var errTail tail
	cmd.Stdout, cmd.Stderr = &out, &errTail
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return usage{}, fmt.Errorf("start %s: %w", cmd.Path, err)
	}
	if started != nil {
		started(t0)
	}
	err := cmd.Wait()
	u := usage{wall: time.Since(t0), stdout: out.String()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		u.cpu = time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
		u.maxRSS = ru.Maxrss * 1024 // kilobytes on Linux
	}
	if err != nil {
		return u, fmt.Errorf("%s %s: %w\n%s", cmd.Path, strings.Join(cmd.Args[1:], " "), err, bytes.TrimSpace(errTail.b))
	}
	return u, nil
}

// mock is a running `synthgen mock`.
type mock struct {
	cmd  *exec.Cmd
	base string // http://127.0.0.1:PORT
	done chan error
}

// startMock launches `synthgen mock` on a free loopback port (port 0: the
// mock prints the one it got) with the given extra flags.
func startMock(ctx context.Context, bin string, flags ...string) (*mock, error) {
	args := append([]string{"mock", "--addr", "127.0.0.1:0", "--grace", "1s"}, flags...)
	cmd := exec.CommandContext(ctx, bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return nil, err
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("start the mock (%s): %w", bin, err)
	}
	m := &mock{cmd: cmd, done: make(chan error, 1)}
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		line := sc.Text()
		if i := strings.Index(line, "http://"); i >= 0 && strings.HasPrefix(line, "mock: serving") {
			m.base = strings.TrimSuffix(line[i:], "/v1")
			break
		}
	}
	if m.base == "" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("the mock (%s %s) exited without saying its address", bin, strings.Join(args, " "))
	}
	go func() {
		_, _ = io.Copy(io.Discard, stderr)
		m.done <- cmd.Wait()
	}()
	return m, nil
}

// stop ends the mock with SIGTERM (it drains its requests) and waits.
func (m *mock) stop() {
	_ = m.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-m.done:
	case <-time.After(30 * time.Second):
		_ = m.cmd.Process.Kill()
		<-m.done
	}
}

// metric reads one counter from the mock's /metrics (summed over its
// label sets).
func (m *mock) metric(name string) (float64, error) {
	resp, err := http.Get(m.base + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("mock /metrics: status %d", resp.StatusCode)
	}
	var sum float64
	found := false
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, name) {
			continue
		}
		rest := line[len(name):]
		if rest == "" || (rest[0] != '{' && rest[0] != ' ') {
			continue // a longer name
		}
		fields := strings.Fields(rest[strings.LastIndexByte(rest, '}')+1:])
		if len(fields) == 0 {
			continue
		}
		v, err := strconv.ParseFloat(fields[0], 64)
		if err != nil {
			return 0, fmt.Errorf("mock /metrics: %s: %w", line, err)
		}
		sum, found = sum+v, true
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if !found {
		return 0, fmt.Errorf("mock /metrics has no %s", name)
	}
	return sum, nil
}

// Counters of the mock: prompt tokens move when a request starts running,
// generation tokens as an answer is produced (one per streamed chunk).
const (
	promptTokensMetric = "vllm:prompt_tokens_total"
	successMetric      = "vllm:request_success_total" // every finished_reason summed
	genTokensMetric    = "vllm:generation_tokens_total"
)

// firstRequest polls the mock's prompt token counter until it moves past
// base and returns when it did. The poll is cheap (a few hundred bytes over
// loopback) and every millisecond, so the figure is that fine.
func (m *mock) firstRequest(ctx context.Context, base float64) (time.Time, error) {
	for {
		v, err := m.metric(promptTokensMetric)
		if err != nil {
			return time.Time{}, err
		}
		if v > base {
			return time.Now(), nil
		}
		select {
		case <-ctx.Done():
			return time.Time{}, errors.New("no request reached the mock")
		case <-time.After(time.Millisecond):
		}
	}
}

// lastAnswer polls the mock's finished-request counter until it reaches
// base+n and returns when it did: every 20 ms while more than a wave of
// answers is left (a poll costs the mock CPU the runs under test share),
// then every millisecond, as firstRequest.
func (m *mock) lastAnswer(ctx context.Context, base float64, n, wave int64) (time.Time, error) {
	for {
		v, err := m.metric(successMetric)
		if err != nil {
			return time.Time{}, err
		}
		if v >= base+float64(n) {
			return time.Now(), nil
		}
		every := time.Millisecond
		if v < base+float64(n-wave) {
			every = 20 * time.Millisecond
		}
		select {
		case <-ctx.Done():
			return time.Time{}, fmt.Errorf("the mock finished %.0f of %d answers", v-base, n)
		case <-time.After(every):
		}
	}
}

// spans is when, after a run's launch, the first request reached the mock,
// and the mock finished the run's last answer (0 when not watched).
type spans struct{ first, last time.Duration }

// runWatched runs cmd and says how long after its launch the first request
// reached the mock (its prompt-token counter moved) and, when answers > 0,
// when the mock had finished that many more answers (its success counter;
// wave is how many finish together at the end, polled every millisecond).
// The polls outlive the run: a tiny job may end before a poll's next look,
// which then comes late (an overstatement, never a miss); the last answer's
// is given 10 s after the exit to see a count the mock moves after its last
// write.
func runWatched(ctx context.Context, m *mock, cmd *exec.Cmd, answers, wave int64) (usage, spans, error) {
	base, err := m.metric(promptTokensMetric)
	if err != nil {
		return usage{}, spans{}, err
	}
	baseDone, err := m.metric(successMetric)
	if err != nil {
		return usage{}, spans{}, err
	}
	lastCtx, stop := context.WithCancel(ctx)
	defer stop()
	first, last := make(chan error, 1), make(chan error, 1)
	var launched, seen, done time.Time
	u, err := run(cmd, func(t0 time.Time) {
		launched = t0
		go func() {
			t, err := m.firstRequest(ctx, base)
			seen = t
			first <- err
		}()
		if answers > 0 {
			go func() {
				t, err := m.lastAnswer(lastCtx, baseDone, answers, wave)
				done = t
				last <- err
			}()
		}
	})
	if err != nil {
		return u, spans{}, err
	}
	if err := <-first; err != nil {
		return u, spans{}, err
	}
	sp := spans{first: seen.Sub(launched)}
	if answers > 0 {
		timer := time.AfterFunc(10*time.Second, stop)
		defer timer.Stop()
		if err := <-last; err != nil {
			return u, spans{}, fmt.Errorf("after the run's exit: %w", err)
		}
		// The client had every answer when it exited: a poll that looked
		// after the exit is late, not the answer.
		sp.last = min(done.Sub(launched), u.wall)
	}
	return u, sp, nil
}

// selfCommand re-executes this binary in the yardstick role.
func selfCommand(ctx context.Context, args ...string) (*exec.Cmd, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find this binary to re-execute it as the yardstick: %w", err)
	}
	cmd := exec.CommandContext(ctx, exe, args...)
	cmd.Env = append(os.Environ(), roleEnv+"="+roleYardstick)
	return cmd, nil
}
