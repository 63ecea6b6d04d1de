package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synthgen/synthgen/mockserver"
)

// inspectJSON is what these tests read of `inspect --json`.
type inspectJSON struct {
	OK      bool   `json:"ok"`
	Sound   bool   `json:"sound"`
	Verdict string `json:"verdict"`
	Dirs    []struct {
		Dataset struct {
			Selected int64 `json:"selected_keys"`
			Done     int64 `json:"done"`
			Pending  int64 `json:"pending"`
			BadRows  int64 `json:"bad_rows"`
			DupIDs   int64 `json:"duplicate_ids"`
		} `json:"dataset"`
	} `json:"dirs"`
}

func inspectDoc(t *testing.T, dir string) (inspectJSON, int) {
	t.Helper()
	out, err := runInspectCmd(t, "--json", dir)
	var doc inspectJSON
	if jerr := json.Unmarshal([]byte(out), &doc); jerr != nil || len(doc.Dirs) != 1 {
		t.Fatalf("inspect --json: %v\n%s", jerr, out)
	}
	return doc, runExitCode(err)
}

// writeBadConversations writes 20 conversations of which 4 are bad in any
// mode (messages is not a list) and 4 only when every turn is read (an
// empty user turn after the first answer).
func writeBadConversations(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for i := range 20 {
		switch i % 5 {
		case 1:
			b.WriteString(`{"messages": 42}` + "\n")
		case 3:
			fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"q%d"},{"role":"assistant","content":"a"},{"role":"user","content":" "}]}`+"\n", i)
		default:
			fmt.Fprintf(&b, `{"messages":[{"role":"user","content":"q%d"},{"role":"assistant","content":"a"},{"role":"user","content":"again %d"},{"role":"assistant","content":"b"}]}`+"\n", i, i)
		}
	}
	path := filepath.Join(t.TempDir(), "conv.jsonl")
	if err := os.WriteFile(path, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// TestTurnsAllBadRowsCounted (issue 21): with generation.turns: all, 8 bad
// rows skipped are 8 in report.json (bad_rows; skipped stays the keys done
// before the run), out of the total, and inspect counts the same 12 keys
// (before, it read first turns only: the 4 rows bad past their first
// answer were keys pending for ever, and inspect --json said ok beside
// them). An interrupted run's directory is sound with every key pending:
// incomplete, exit 4, not ok; the resume completes it: ok, exit 0.
func TestTurnsAllBadRowsCounted(t *testing.T) {
	data := writeBadConversations(t)
	_, slow := startStatusMock(t, mockserver.Options{TokenDelay: 50 * time.Millisecond, MeanTokens: 4000, Seed: 5})
	cj := cliJob{baseURL: slow.URL + "/v1", data: data, dir: filepath.Join(t.TempDir(), "out")}
	r := startRunInProcess(cj.args("--generation.turns", "all", "--concurrency", "4", "--generation.max_tokens", "4000")[1:]...)
	waitInFlight(t, r, filepath.Join(cj.dir, statusFile), 4)
	signalRun(t, r, syscall.SIGINT)
	waitForState(t, r, filepath.Join(cj.dir, statusFile), stateDraining)
	signalRun(t, r, syscall.SIGINT)
	if code := runExitCode(r.wait(t)); code != exitInterrupted {
		t.Fatalf("exit %d, want %d; stderr:\n%s", code, exitInterrupted, r.stderr.String())
	}
	rep := readReport(t, cj.dir)
	if rep.Canceled != 4 || rep.Written != 0 {
		t.Errorf("interrupted: canceled %d, written %d; want the 4 in flight canceled, none written", rep.Canceled, rep.Written)
	}
	doc, code := inspectDoc(t, cj.dir)
	d := doc.Dirs[0].Dataset
	if code != exitPending || doc.OK || !doc.Sound || !strings.HasPrefix(doc.Verdict, "incomplete: 12 of 12 keys pending") ||
		d.Selected != 12 || d.Pending != 12 || d.BadRows != 8 {
		t.Errorf("interrupted: inspect exit %d, %+v; want exit %d, sound, not ok, 12 of 12 pending, 8 bad rows", code, doc, exitPending)
	}

	_, fast := startStatusMock(t, mockserver.Options{MeanTokens: 16, Seed: 5})
	cj.baseURL = fast.URL + "/v1"
	res := cliRun(t, cj.args("--generation.turns", "all", "--generation.max_tokens", "4000")...)
	res.ok(t, "resume")
	for _, line := range []string{data + ":2: messages: not a list", data + ":4: messages[2].content: empty"} {
		if !strings.Contains(res.stderr, "skip row "+line) {
			t.Errorf("stderr does not name the bad row %q:\n%s", line, res.stderr)
		}
	}
	rep = readReport(t, cj.dir)
	if rep.Written != 12 || rep.BadRows != 8 || rep.Skipped != 0 || rep.Done != 12 || rep.Total != 12 {
		t.Errorf("resume: written %d, bad_rows %d, skipped %d, done %d/%d; want 12, 8, 0, 12/12", rep.Written, rep.BadRows, rep.Skipped, rep.Done, rep.Total)
	}
	if !strings.Contains(res.stdout, "done 12/12 in ") || !strings.Contains(res.stdout, ", 8 bad rows skipped, ") {
		t.Errorf("summary does not count the bad rows apart:\n%s", res.stdout)
	}
	doc, code = inspectDoc(t, cj.dir)
	d = doc.Dirs[0].Dataset
	if code != exitOK || !doc.OK || d.Selected != 12 || d.Done != 12 || d.Pending != 0 || d.BadRows != 8 {
		t.Errorf("done: inspect exit %d, %+v; want ok, 12 of 12 done, 8 bad rows", code, doc)
	}
	if out, _ := runInspectCmd(t, cj.dir); !strings.Contains(out, "12 keys in "+data+": 12 done, 0 failed, 0 pending") ||
		!strings.Contains(out, "8 bad rows skipped") || !strings.Contains(out, "ok: no problems, every selected key done") {
		t.Errorf("inspect:\n%s", out)
	}
}

// TestRepeatedCustomIDCounts (issue 21): a repeated custom_id in a fresh
// directory is a bad row, named with its line and its first row's; it is
// not a key already done (status.json's already_done, report.json's
// skipped) and inspect counts it as the run did; the resume says the same.
func TestRepeatedCustomIDCounts(t *testing.T) {
	_, srv := startStatusMock(t, mockserver.Options{MeanTokens: 16, Seed: 5})
	var b strings.Builder
	for i, id := range []string{"a", "b", "a", "c", "b", "d"} {
		fmt.Fprintf(&b, `{"custom_id":%q,"method":"POST","url":"/v1/chat/completions","body":{"messages":[{"role":"user","content":"q%d"}]}}`+"\n", id, i)
	}
	data := filepath.Join(t.TempDir(), "batch.jsonl")
	if err := os.WriteFile(data, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	cj := cliJob{baseURL: srv.URL + "/v1", data: data, dir: filepath.Join(t.TempDir(), "out")}
	for _, run := range []struct {
		name    string
		written int
		skipped int64
	}{{"fresh", 4, 0}, {"resume", 0, 4}} {
		res := cliRun(t, cj.args()...)
		res.ok(t, run.name)
		for _, line := range []string{
			data + `:3: custom_id: repeats the id "a" of ` + data + ":1",
			data + `:5: custom_id: repeats the id "b" of ` + data + ":2",
		} {
			if !strings.Contains(res.stderr, "skip row "+line) {
				t.Errorf("%s: stderr does not name %q:\n%s", run.name, line, res.stderr)
			}
		}
		rep := readReport(t, cj.dir)
		if rep.Written != run.written || rep.Skipped != run.skipped || rep.BadRows != 2 || rep.AlreadyDone != run.skipped || rep.Done != 4 || rep.Total != 4 {
			t.Errorf("%s: written %d, skipped %d, bad_rows %d, already_done %d, done %d/%d; want %d, %d, 2, %d, 4/4",
				run.name, rep.Written, rep.Skipped, rep.BadRows, rep.AlreadyDone, rep.Done, rep.Total, run.written, run.skipped, run.skipped)
		}
	}
	wantIDs(t, "records", cliRecords(t, cj.dir), "a", "b", "c", "d")
	doc, code := inspectDoc(t, cj.dir)
	d := doc.Dirs[0].Dataset
	if code != exitOK || !doc.OK || d.Selected != 4 || d.Done != 4 || d.BadRows != 2 || d.DupIDs != 2 {
		t.Errorf("inspect exit %d, %+v; want ok, 4 of 4 done, 2 bad rows repeating an id", code, doc)
	}
}
