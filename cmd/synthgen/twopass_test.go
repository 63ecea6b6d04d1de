package main

// A second pass over a first one's output directory: the built binary,
// killed with SIGKILL mid-pass and resumed, judges every first-pass key
// exactly once; a first pass that changed after the second started is
// refused on resume, and one a live run holds is refused with its pid.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synthgen/synthgen/chat"
	"github.com/synthgen/synthgen/mockserver"
	"github.com/synthgen/synthgen/sink"
)

// qaDataset writes n rows of columns question, context and lang.
func qaDataset(t testing.TB, dir string, n int) string {
	t.Helper()
	var b strings.Builder
	for i := range n {
		line, err := json.Marshal(map[string]any{
			"question": fmt.Sprintf("question %d: why %s?", i, strings.Repeat("y", i%13)),
			"context":  fmt.Sprintf("context %d, %d words", i, 10+i*7%90),
			"lang":     []string{"English", "French", "German"}[i%3],
		})
		if err != nil {
			t.Fatal(err)
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, "qa.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func templateFlag(t testing.TB, turns ...chat.Message) string {
	t.Helper()
	b, err := json.Marshal(turns)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var (
	answerTemplate = []chat.Message{
		{Role: "system", Content: "Answer in {{.lang}}."},
		{Role: "user", Content: "Context: {{.context}}\nQuestion: {{.question}}"},
	}
	judgeTemplate = []chat.Message{
		{Role: "system", Content: "You grade answers from 1 to 10."},
		{Role: "user", Content: "{{(index .messages 1).content}}\nAnswer ({{.finish_reason}}): {{.content}}"},
	}
)

// judgeSent is what the second pass sends for a first-pass record.
func judgeSent(r sink.Record) []chat.Message {
	return []chat.Message{
		{Role: "system", Content: "You grade answers from 1 to 10."},
		{Role: "user", Content: r.Messages[1].Content + "\nAnswer (" + r.FinishReason + "): " + r.Content},
	}
}

// passArgs are one pass's flags.
func passArgs(baseURL, data, out, format string, turns []chat.Message, t testing.TB, extra ...string) []string {
	return append([]string{"run",
		"--dataset.path", data,
		"--endpoint.base_url", baseURL,
		"--output.dir", out,
		"--output.format", format,
		"--generation.max_tokens", "120",
		"--output.shard_size", "40",
		"--output.sync_interval", "50ms",
		"--concurrency", "32",
		"--progress.interval", "100ms",
		"--log-format", "json",
		"--prompt.messages", templateFlag(t, turns...),
	}, extra...)
}

// TestTwoPassKill9: every first-pass key (with generation.n 2: id#sample)
// is judged exactly once by a second pass killed again and again.
func TestTwoPassKill9(t *testing.T) {
	seed := chaosSeed(t)
	t.Logf("chaos seed %d (replay: SYNTHGEN_TEST_CHAOS_SEED=%d go test -run TestTwoPassKill9 ./cmd/synthgen)", seed, seed)
	synthgenBinary(t)
	for i, c := range []struct {
		format string
		n      int
	}{{"jsonl", 1}, {"parquet", 2}} {
		t.Run(fmt.Sprintf("%s/n=%d", c.format, c.n), func(t *testing.T) {
			t.Parallel()
			rng := rand.New(rand.NewPCG(uint64(seed), uint64(40+i)))
			work := t.TempDir()
			const rows = 500
			m := startMockProcess(t, "--token-delay", "2ms", "--mean-tokens", "40", "--seed", strconv.FormatInt(seed, 10))
			first, second := filepath.Join(work, "answers"), filepath.Join(work, "judged")
			p := startSynthgen(t, "first", passArgs(m.BaseURL, qaDataset(t, work, rows), first, c.format, answerTemplate, t, "--generation.n", strconv.Itoa(c.n))...)
			if code := p.wait(t, 90*time.Second); code != 0 {
				t.Fatalf("first pass: exit %d\n%s", code, p.stderr(t))
			}
			firstInv, err := readInventory(first)
			if err != nil || len(firstInv.Records) != rows*c.n {
				t.Fatalf("first pass: %v, %d records, want %d", err, len(firstInv.Records), rows*c.n)
			}

			args := passArgs(m.BaseURL, first, second, c.format, judgeTemplate, t)
			midPass := 0 // kills that left part of the pass on disk
			onDisk := 0
			total := rows * c.n
			for run := 0; run < 6; run++ {
				p := startSynthgen(t, fmt.Sprintf("second%02d", run), args...)
				// A kill in start-up (recovery, the first pass's stamp)
				// now and then; else once this run counted a few more
				// answers done: the kill lands mid-pass however slowly a
				// loaded machine starts the process.
				what := "in start-up"
				if rng.IntN(4) == 0 {
					select {
					case <-p.done:
					case <-time.After(time.Duration(rng.Int64N(int64(150 * time.Millisecond)))):
					}
				} else {
					target := int64(onDisk + 1 + rng.IntN(total/8))
					what = fmt.Sprintf("at done >= %d", target)
					waitDone(t, p, target, 60*time.Second)
				}
				if p.exited() {
					t.Fatalf("second pass run %d ended (exit %d) before its kill %s\n%s", run, p.cmd.ProcessState.ExitCode(), what, p.stderr(t))
				}
				_ = p.cmd.Process.Kill()
				<-p.done
				if p.cmd.ProcessState.ExitCode() != -1 {
					t.Fatalf("second pass run %d exited with %d just before its kill\n%s", run, p.cmd.ProcessState.ExitCode(), p.stderr(t))
				}
				inv, err := readInventory(second) // no key twice, final files parse
				if err != nil {
					t.Fatalf("after kill %d: %v", run+1, err)
				}
				if len(inv.Records) < onDisk {
					t.Fatalf("after kill %d: %d records, %d before: a kill lost durable records", run+1, len(inv.Records), onDisk)
				}
				onDisk = len(inv.Records)
				if onDisk > 0 && onDisk < total {
					midPass++
				}
				t.Logf("kill %d %s: %d of %d judged on disk", run+1, what, onDisk, total)
			}
			if midPass == 0 {
				t.Fatalf("no kill landed mid-pass (seed %d)", seed)
			}
			final := startSynthgen(t, "second-final", args...)
			if code := final.wait(t, 90*time.Second); code != 0 {
				t.Fatalf("second pass, final run: exit %d\n%s", code, final.stderr(t))
			}
			inv, err := readInventory(second)
			if err != nil {
				t.Fatal(err)
			}
			if len(inv.Temps) > 0 || inv.Errors > 0 {
				t.Errorf("after a clean end: temporaries %v, %d error records", inv.Temps, inv.Errors)
			}
			// Every first-pass key judged exactly once (readInventory
			// refuses a key twice), under the id the two passes join on.
			if len(inv.Records) != len(firstInv.Records) {
				t.Errorf("%d judged, %d first-pass keys", len(inv.Records), len(firstInv.Records))
			}
			for k, r := range firstInv.Records {
				id := k.ID
				if c.n > 1 {
					id = k.ID + "#" + strconv.Itoa(k.Sample)
				}
				j, ok := inv.Records[sink.Key{ID: id}]
				if !ok {
					t.Errorf("first-pass key %v was not judged (no id %q)", k, id)
					continue
				}
				if want := judgeSent(r); fmt.Sprint(j.Messages) != fmt.Sprint(want) {
					t.Errorf("judged %q with %q, want %q", id, j.Messages, want)
				}
			}
		})
	}
}

// waitDone waits until p's last progress line counts at least n done, or p
// ends; timeout only bounds a failure.
func waitDone(t *testing.T, p *proc, n int64, timeout time.Duration) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !p.exited() {
		if lines := progressLines(t, p.stdout(t)); len(lines) > 0 && lines[len(lines)-1].Done >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("no progress line with done >= %d within %s; stderr:\n%s", n, timeout, p.stderr(t))
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestTwoPassRefusesChangedFirstPass: a first pass that grew after the
// second began is refused on resume with the part that is new, and a first
// pass a live run holds is refused with the pid holding it.
func TestTwoPassRefusesChangedFirstPass(t *testing.T) {
	// Not parallel: clearSynthgenEnv sets the environment (t.Setenv), as
	// soon as any SYNTHGEN_ variable is set (.ci/run sets one).
	clearSynthgenEnv(t)
	synthgenBinary(t)
	work := t.TempDir()
	m := startMock(t, mockserver.Options{MeanTokens: 20, Seed: 7})
	data := qaDataset(t, work, 60)
	first, second := filepath.Join(work, "answers"), filepath.Join(work, "judged")
	firstArgs := passArgs(m.BaseURL, data, first, "jsonl", answerTemplate, t, "--dataset.limit", "30")
	cliRun(t, firstArgs...).ok(t, "first pass")
	cliRun(t, passArgs(m.BaseURL, first, second, "jsonl", judgeTemplate, t)...).ok(t, "second pass")
	secondInv, err := readInventory(second)
	if err != nil || len(secondInv.Records) != 30 {
		t.Fatalf("second pass: %v, %d records", err, len(secondInv.Records))
	}

	// The first pass grows by its limit: parts more.
	cliRun(t, passArgs(m.BaseURL, data, first, "jsonl", answerTemplate, t)...).ok(t, "first pass, all rows")
	r := cliRun(t, passArgs(m.BaseURL, first, second, "jsonl", judgeTemplate, t)...)
	for _, w := range []string{"dataset.output: job ", "(on disk) -> ", "data/part-000001.jsonl is new", "the output directory this job reads (dataset.path, a first pass) is not what it was"} {
		if exitCode(r.err) != exitUsage || !strings.Contains(fmt.Sprint(r.err), w) {
			t.Errorf("resume over a grown first pass: exit %d, %v\nwant %q", exitCode(r.err), r.err, w)
		}
	}
	if after, _ := readInventory(second); len(after.Records) != 30 {
		t.Errorf("the refused resume wrote: %d records", len(after.Records))
	}
	// inspect says so too.
	if in := cliRun(t, "inspect", second); !strings.Contains(in.stdout, "part-000001.jsonl is new") {
		t.Errorf("inspect of the second pass does not say the first grew:\n%s", in.stdout)
	}

	// A first pass being written: refused with the writer's pid.
	slow := startMock(t, mockserver.Options{TokenDelay: 20 * time.Millisecond, MeanTokens: 200, Seed: 7})
	busy := filepath.Join(work, "busy")
	p := startSynthgen(t, "busy", passArgs(slow.BaseURL, data, busy, "jsonl", answerTemplate, t, "--concurrency", "2")...)
	p.waitForOutput(t, true, regexp.MustCompile(`prompts from`), 30*time.Second)
	r = cliRun(t, passArgs(m.BaseURL, busy, filepath.Join(work, "judged-busy"), "jsonl", judgeTemplate, t)...)
	want := fmt.Sprintf("is being written by synthgen pid %d on ", p.cmd.Process.Pid)
	if exitCode(r.err) != exitUsage || !strings.Contains(fmt.Sprint(r.err), want) {
		t.Errorf("a pass over a live run: exit %d, %v\nwant %q", exitCode(r.err), r.err, want)
	}
	// Its own output directory is no dataset for a pass.
	r = cliRun(t, passArgs(m.BaseURL, first, first, "jsonl", judgeTemplate, t)...)
	if exitCode(r.err) != exitUsage || !strings.Contains(fmt.Sprint(r.err), "is output.dir") {
		t.Errorf("a pass over its own output: exit %d, %v", exitCode(r.err), r.err)
	}
}
