package hidden

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/synthgen/synthgen/internal/backoff"
	"github.com/synthgen/synthgen/internal/diskfault"
	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/internal/safetensors"
)

// Step names the points of an extraction a crash test stops at, in order.
const (
	StepAnswered   = "answered"    // the server's answer is in, its file named
	StepLockWaited = "lock waited" // the lock is released: the file is complete
	StepMoved      = "moved"       // the checked file is in DIR/hidden, fsynced
	StepMarked     = "marked"      // the log line is durable: the file is kept
)

// BadFile is a file the server wrote that is not the states of what was
// sent: a mismatch, a wrong shape, a non-finite value. It is retried, then
// reported, never kept.
type BadFile struct {
	Path, Reason string
}

func (e *BadFile) Error() string { return fmt.Sprintf("%s: %s", e.Path, e.Reason) }

// Extractor runs one unit at a time through the protocol; it is safe for
// concurrent use.
type Extractor struct {
	cfg Config
	out string // DIR/hidden
	log *Log
	// Hook, when not nil, runs after each Step with the unit's file name;
	// crash tests panic in it to stop there as a kill would.
	Hook func(step, file string)
	// stop, once closed, starts no other attempt (Hooks.Stop); onError is
	// told each failed attempt (Hooks.Error). Both may be nil.
	stop    <-chan struct{}
	onError func(Unit, error)
}

// NewExtractor extracts into outDir/DirName, marking in log.
func NewExtractor(cfg Config, outDir string, log *Log) *Extractor {
	return &Extractor{cfg: cfg.withDefaults(), out: filepath.Join(outDir, DirName), log: log}
}

func (x *Extractor) step(s, file string) {
	if x.Hook != nil {
		x.Hook(s, file)
	}
}

// Extract keeps u's states unless they are kept already. The error is a
// *BadFile or the HTTP failure of the last attempt once the attempts are
// used up; a full disk or a cancelled context ends it at once, and a
// closed stop before another attempt with ErrStopped (the unit is left
// for the next pass, not failed).
func (x *Extractor) Extract(ctx context.Context, u Unit) (Entry, error) {
	var last error
	for attempt := 1; attempt <= x.cfg.Attempts; attempt++ {
		if x.log.Has(u) {
			return Entry{}, nil
		}
		e, err := x.once(ctx, u)
		if err == nil {
			return e, nil
		}
		if ctx.Err() != nil || errors.Is(err, syscall.ENOSPC) {
			return Entry{}, err
		}
		last = err
		if x.onError != nil {
			x.onError(u, err)
		}
		if attempt == x.cfg.Attempts {
			break
		}
		if closed(x.stop) || !sleepUnlessStopped(ctx, x.stop, x.cfg.Backoff.Delay(attempt)) {
			if ctx.Err() != nil {
				return Entry{}, ctx.Err()
			}
			return Entry{}, ErrStopped
		}
	}
	return Entry{}, fmt.Errorf("%s after %d attempts: %w", u.FileName(), x.cfg.Attempts, last)
}

// sleepUnlessStopped waits d; false when ctx ends or stop closes first.
func sleepUnlessStopped(ctx context.Context, stop <-chan struct{}, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	case <-stop:
		return false
	}
}

func (x *Extractor) once(ctx context.Context, u Unit) (Entry, error) {
	src, err := x.request(ctx, u.IDs)
	if err != nil {
		return Entry{}, err
	}
	name := u.FileName()
	x.step(StepAnswered, name)
	if err := x.waitLock(ctx, src); err != nil {
		return Entry{}, err
	}
	x.step(StepLockWaited, name)
	// The lock is left on disk by the server; it means nothing once released.
	defer os.Remove(src + ".lock")
	size, err := x.check(src, u.IDs)
	if err != nil {
		var bad *BadFile
		if errors.As(err, &bad) {
			_ = os.Remove(src)
		}
		return Entry{}, err
	}
	dst := filepath.Join(x.out, name)
	if err := x.move(src, dst); err != nil {
		return Entry{}, err
	}
	x.step(StepMoved, name)
	e := Entry{ID: u.Key.ID, Sample: u.Key.Sample, Turn: u.Turn, File: name, Tokens: len(u.IDs), Bytes: size}
	if err := x.log.Mark(e); err != nil {
		return Entry{}, err
	}
	x.step(StepMarked, name)
	return e, nil
}

// request sends the prefill-only completion and returns the local path of
// the file the server names.
func (x *Extractor) request(ctx context.Context, ids []int64) (string, error) {
	req := map[string]any{"prompt": ids, "max_tokens": 1, "return_token_ids": true}
	if x.cfg.Model != "" {
		req["model"] = x.cfg.Model // empty: vLLM's one served model
	}
	body, err := json.Marshal(req)
	if err != nil {
		return "", err
	}
	url := strings.TrimSuffix(x.cfg.BaseURL, "/") + "/completions"
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return "", fmt.Errorf("extract: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if x.cfg.APIKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+x.cfg.APIKey)
	}
	resp, err := x.cfg.HTTP.Do(hreq)
	if err != nil {
		return "", fmt.Errorf("extract: %w", err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	if err != nil {
		return "", fmt.Errorf("extract: read answer: %w", err)
	}
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("extract: HTTP %d: %.200s", resp.StatusCode, data)
	}
	return x.answerPath(data)
}

// answerPath is the local path of the file an answer names in its
// kv_transfer_params.hidden_states_path.
func (x *Extractor) answerPath(data []byte) (string, error) {
	var ans struct {
		KV *struct {
			Path string `json:"hidden_states_path"`
		} `json:"kv_transfer_params"`
	}
	if err := json.Unmarshal(data, &ans); err != nil {
		return "", fmt.Errorf("extract: answer: %w", err)
	}
	if ans.KV == nil || ans.KV.Path == "" {
		return "", errors.New("extract: answer: no kv_transfer_params.hidden_states_path (is the server run with the hidden-states connector?)")
	}
	return x.local(ans.KV.Path)
}

// local maps the server's path to this machine's: its base name under
// cfg.Dir. A name that is not a plain safetensors file name is refused, so
// an answer cannot make the pass read or remove files elsewhere.
func (x *Extractor) local(server string) (string, error) {
	base := filepath.Base(filepath.FromSlash(server))
	if base == "." || base == ".." || base == string(filepath.Separator) || !strings.HasSuffix(base, ".safetensors") {
		return "", fmt.Errorf("extract: answer: kv_transfer_params.hidden_states_path %q: not a safetensors file", server)
	}
	return filepath.Join(x.cfg.Dir, base), nil
}

// waitLock waits until the server releases path's lock, polling a
// non-blocking flock (a blocking one could not end with ctx) up to
// LockWait. A lock file that does not exist is no wait: the file either
// exists or the check says it does not.
func (x *Extractor) waitLock(ctx context.Context, path string) error {
	f, err := os.Open(path + ".lock")
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	defer f.Close()
	deadline := time.NewTimer(x.cfg.LockWait)
	defer deadline.Stop()
	poll := backoff.Policy{Initial: 5 * time.Millisecond, Max: 500 * time.Millisecond}
	for attempt := 1; ; attempt++ {
		locked, err := lockedByOther(f)
		if err != nil {
			return fmt.Errorf("lock %s: %w", path, err)
		}
		if !locked {
			return nil
		}
		t := time.NewTimer(poll.Ceiling(attempt))
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-deadline.C:
			t.Stop()
			return fmt.Errorf("lock %s.lock: still held after %s (the server may have died writing it)", path, x.cfg.LockWait)
		case <-t.C:
		}
	}
}

// check opens the complete file and holds it to what was sent.
func (x *Extractor) check(path string, ids []int64) (int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, fmt.Errorf("open %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return 0, fmt.Errorf("stat %s: %w", path, err)
	}
	sf, err := safetensors.Open(f, st.Size())
	if err != nil {
		return 0, &BadFile{path, err.Error()}
	}
	got, err := sf.Int64s("token_ids", int64(len(ids)))
	if err != nil {
		return 0, &BadFile{path, err.Error()}
	}
	if len(got) != len(ids) {
		return 0, &BadFile{path, fmt.Sprintf("token_ids: %d ids, sent %d", len(got), len(ids))}
	}
	for i := range ids {
		if got[i] != ids[i] {
			return 0, &BadFile{path, fmt.Sprintf("token_ids[%d] = %d, sent %d", i, got[i], ids[i])}
		}
	}
	hs, ok := sf.Tensors["hidden_states"]
	if !ok {
		return 0, &BadFile{path, "no hidden_states tensor"}
	}
	want := []int64{int64(len(ids)), int64(x.cfg.Layers), int64(x.cfg.HiddenSize)}
	if len(hs.Shape) != 3 || hs.Shape[0] != want[0] || hs.Shape[1] != want[1] || hs.Shape[2] != want[2] {
		return 0, &BadFile{path, fmt.Sprintf("hidden_states shape %v, want %v (hidden_states.layers, hidden_states.hidden_size)", hs.Shape, want)}
	}
	i, err := sf.FirstNonFinite("hidden_states")
	if err != nil {
		return 0, &BadFile{path, err.Error()}
	}
	if i >= 0 {
		return 0, &BadFile{path, fmt.Sprintf("hidden_states: element %d (token %d) is not finite", i, i/(want[1]*want[2]))}
	}
	return st.Size(), nil
}

// move puts src at dst: a rename when both are on one filesystem, a copy
// fsynced under a temporary name then renamed when not. Either way the
// file's data and dst's directory entry are durable when it returns.
func (x *Extractor) move(src, dst string) error {
	if err := diskfault.Check("write", dst); err != nil {
		return fmt.Errorf("move %s: %w", src, err)
	}
	err := os.Rename(src, dst)
	if errors.Is(err, syscall.EXDEV) {
		if err := copyFile(src, dst); err != nil {
			return err
		}
		_ = os.Remove(src)
		return nil
	}
	if err != nil {
		return fmt.Errorf("move %s: %w", src, err)
	}
	// The server need not have fsynced what it wrote.
	f, err := os.Open(dst)
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dst, err)
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("fsync %s: %w", dst, err)
	}
	return durable.SyncDir(filepath.Dir(dst))
}

func copyFile(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return fmt.Errorf("copy %s: %w", src, err)
	}
	defer in.Close()
	out, err := durable.Create(dst, 0o644)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Abort()
		return fmt.Errorf("copy %s: %w", src, err)
	}
	return out.Commit()
}
