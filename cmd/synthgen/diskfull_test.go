package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/synthgen/synthgen/internal/diskfault"
)

// TestRunDiskFull fills the disk under a run: from the third data shard on,
// every write (or every fsync) of a shard of DIR fails with ENOSPC, as on a
// full filesystem. The run stops with exit 1 and a message that names the
// file, the directory and its free space; its summary and report.json
// count only the records an fsync made durable (two shards of 16), not
// those that reached the page cache after it; every record on disk is
// whole and once. Once the space is "freed" (the fault removed), the same
// command completes the job: every key once, and only the keys missing
// from disk asked again.
func TestRunDiskFull(t *testing.T) {
	t.Parallel()
	const prompts, shard, durable = 200, 16, 2 * 16
	for _, op := range []string{"write", "fsync"} {
		t.Run(op, func(t *testing.T) {
			_, url := cliMock(t, nil)
			cj := cliJob{baseURL: url, data: cliDataset(t, prompts, 0), dir: filepath.Join(t.TempDir(), "out")}
			// No sync but the one that closes a shard: the records of the
			// third shard are in the page cache when its fsync fails.
			args := cj.args("--output.sync_interval", "1h", "--output.shard_size", fmt.Sprint(shard))
			dataDir := filepath.Join(cj.dir, "data") + string(filepath.Separator)
			var n atomic.Int32
			restore := diskfault.Set(func(o, path string) error {
				if o != op || !strings.HasPrefix(path, dataDir) {
					return nil
				}
				if n.Add(1) < 3 {
					return nil
				}
				return syscall.ENOSPC // full, and it stays full
			})
			t.Cleanup(restore)

			r := cliRun(t, args...)
			if r.err == nil {
				t.Fatalf("the run on a full disk succeeded:\n%s", r.stdout)
			}
			if code := exitCode(r.err); code != exitFailure {
				t.Errorf("exit %d, want %d (the run could not go on)", code, exitFailure)
			}
			if !errors.Is(r.err, syscall.ENOSPC) {
				t.Errorf("the error does not unwrap to ENOSPC: %v", r.err)
			}
			want := fmt.Sprintf("no space left on device writing %s: ", filepath.Join(cj.dir, "data", "part-000002.jsonl.open"))
			wantEnd := fmt.Sprintf(" free on the filesystem of %s; free space, then run the same command to resume", cj.dir)
			if msg := r.err.Error(); !strings.HasPrefix(msg, want) || !strings.HasSuffix(msg, wantEnd) {
				t.Errorf("the message is\n  %s\nwant\n  %s<free>%s", msg, want, wantEnd)
			}
			t.Logf("Error: %v", r.err)
			if !strings.HasPrefix(r.stdout, fmt.Sprintf("failed %d/%d ", durable, prompts)) {
				t.Errorf("the summary does not count the %d durable records:\n%s", durable, r.stdout)
			}
			t.Logf("summary: %s", strings.SplitN(r.stdout, "\n", 2)[0])
			var report struct {
				ExitCode int    `json:"exit_code"`
				Written  int    `json:"written"`
				Error    string `json:"error"`
			}
			if b, err := os.ReadFile(filepath.Join(cj.dir, "report.json")); err != nil {
				t.Errorf("report.json: %v", err)
			} else if err := json.Unmarshal(b, &report); err != nil {
				t.Errorf("report.json: %v", err)
			} else if report.ExitCode != exitFailure || report.Written != durable || !strings.Contains(report.Error, "no space left on device") {
				t.Errorf("report.json says exit %d, written %d, error %q; want exit %d, written %d, no space left", report.ExitCode, report.Written, report.Error, exitFailure, durable)
			}

			inv, err := readInventory(cj.dir) // whole records, each key once
			if err != nil {
				t.Fatal(err)
			}
			if len(inv.Records) < durable {
				t.Errorf("%d records on disk, fewer than the %d fsynced", len(inv.Records), durable)
			}
			t.Logf("on disk after the failure: %d records, %d torn files, temporaries %v", len(inv.Records), inv.Torn, inv.Temps)

			// Still full: a resume fails the same way at its first shard,
			// and adds no key twice.
			r = cliRun(t, args...)
			if exitCode(r.err) != exitFailure || !strings.Contains(fmt.Sprint(r.err), "no space left on device writing") {
				t.Errorf("a resume on the still-full disk: exit %d, %v", exitCode(r.err), r.err)
			}
			if inv, err = readInventory(cj.dir); err != nil {
				t.Fatal(err)
			}

			restore() // space freed
			resumeAfterDiskFull(t, cj, args, prompts, len(inv.Records))
		})
	}
}

// resumeAfterDiskFull runs the job again once space is freed, with onDisk
// records left by the failed runs: it completes with every key once, asks
// only the missing keys and leaves no temporary. It sends to a mock of its
// own: a request the failed run had sent when it stopped may reach the
// first mock's handler after that run returned (a loaded machine runs the
// handler late), and would be counted as the resume's.
func resumeAfterDiskFull(t *testing.T, cj cliJob, args []string, prompts, onDisk int) {
	t.Helper()
	m, url := cliMock(t, nil)
	args = slices.Clone(args)
	for i := range args[:len(args)-1] {
		if args[i] == "--endpoint.base_url" {
			args[i+1] = url
		}
	}
	before := m.Stats().Requests
	r := cliRun(t, args...)
	r.ok(t, "resume after freeing space")
	wantIDs(t, "resumed", cliRecords(t, cj.dir), idRange(0, prompts)...)
	if asked, missing := m.Stats().Requests-before, int64(prompts-onDisk); asked != missing {
		t.Errorf("the resume asked %d prompts, want the %d missing from disk", asked, missing)
	}
	if inv, err := readInventory(cj.dir); err != nil {
		t.Error(err)
	} else if len(inv.Temps) > 0 {
		t.Errorf("temporaries left after the job completed: %v", inv.Temps)
	}
}
