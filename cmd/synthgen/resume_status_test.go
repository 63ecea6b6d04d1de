package main

import (
	"io"
	"net/http"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"
)

// questionID is the row index in a cliDataset prompt ("question N").
var questionID = regexp.MustCompile(`question ([0-9]+)"`)

// TestResumeFirstStatusCountsWhatIsOnDisk: the first status.json of a
// resume says what the directory holds, though the keys done on disk lie
// past the first one to ask. Run 1 answers 40 prompts but every fourth
// (1, 5, 9, ...) fails for good; run 2 asks those again (--retry-errors)
// against a server that holds every answer back, so the producer has
// passed only the keys before the pool filled, and no progress interval
// comes (progress.interval 1h): the status.json there is is the one
// written at the first request. Its done is the 30 records on disk, not
// the 1 done key before id 1; once the run has ended, done is 40, each
// key counted once.
func TestResumeFirstStatusCountsWhatIsOnDisk(t *testing.T) {
	const prompts = 40
	failEvery4th := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/chat/completions") {
				body, _ := io.ReadAll(r.Body)
				if m := questionID.FindSubmatch(body); m != nil {
					if n, _ := strconv.Atoi(string(m[1])); n%4 == 1 {
						http.Error(w, `{"object":"error","message":"refused on purpose","type":"BadRequestError","code":400}`, http.StatusBadRequest)
						return
					}
				}
				r.Body = io.NopCloser(strings.NewReader(string(body)))
			}
			next.ServeHTTP(w, r)
		})
	}
	_, url1 := cliMock(t, failEvery4th)
	data := cliDataset(t, prompts, 0)
	dir := filepath.Join(t.TempDir(), "out")
	j := cliJob{baseURL: url1, data: data, dir: dir}
	if r := cliRun(t, j.args()...); exitCode(r.err) != 3 {
		t.Fatalf("run 1: exit %d (%v), want 3 (failed for good); stderr:\n%s", exitCode(r.err), r.err, r.stderr)
	}
	onDisk := len(cliRecords(t, dir))
	if onDisk != prompts-prompts/4 {
		t.Fatalf("run 1 wrote %d records, want %d", onDisk, prompts-prompts/4)
	}

	release := make(chan struct{})
	holdAnswers := func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if strings.HasSuffix(r.URL.Path, "/chat/completions") {
				select {
				case <-release:
				case <-r.Context().Done():
					return
				}
			}
			next.ServeHTTP(w, r)
		})
	}
	_, url2 := cliMock(t, holdAnswers)
	released := false
	t.Cleanup(func() {
		if !released {
			close(release)
		}
	})
	j.baseURL = url2
	run := startRunInProcess(j.args("--retry-errors", "--progress.interval", "1h")[1:]...)
	status := filepath.Join(dir, statusFile)
	deadline := time.Now().Add(30 * time.Second)
	for {
		st, ok := readStatusFile(t, status)
		if ok && st.State == stateRunning {
			if st.Done != int64(onDisk) || st.AlreadyDone != int64(onDisk) || st.AlreadyFailed != 0 || st.Total != prompts {
				t.Errorf("first status.json of the resume: done %d (already %d), already failed %d, total %d; want %d on disk, 0, %d",
					st.Done, st.AlreadyDone, st.AlreadyFailed, st.Total, onDisk, prompts)
			}
			break
		}
		select {
		case <-run.done:
			t.Fatalf("the resume ended (%v) before its first status.json; stderr:\n%s", run.err, run.stderr.String())
		case <-time.After(5 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("no status.json of the resume; stderr:\n%s", run.stderr.String())
		}
	}
	close(release)
	released = true
	if err := run.wait(t); err != nil {
		t.Fatalf("resume: %v\n%s", err, run.stderr.String())
	}
	st, _ := readStatusFile(t, status)
	if st.State != stateDone || st.Done != prompts || st.AlreadyDone != int64(onDisk) || st.Total != prompts {
		t.Errorf("final status.json: state %s, done %d (already %d), total %d; want done, %d (%d), %d",
			st.State, st.Done, st.AlreadyDone, st.Total, prompts, onDisk, prompts)
	}
}
