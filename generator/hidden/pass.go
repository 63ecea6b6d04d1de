package hidden

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/synthgen/synthgen/internal/durable"
	"github.com/synthgen/synthgen/sink"
	"github.com/synthgen/synthgen/sink/layout"
)

// FailedName is the file inside DirName listing the units whose files
// failed their checks or requests after every attempt, rewritten whole at
// the end of a pass; a later pass asks them again.
const FailedName = layout.HiddenFailedName

// Failure is a unit given up on, and why.
type Failure struct {
	ID     string `json:"id"`
	Sample int    `json:"sample"`
	Turn   int    `json:"turn"`
	Cause  string `json:"cause"`
}

// Result is what a pass did.
type Result struct {
	Units     int   // units with token ids in the records
	Kept      int   // kept by this pass
	Skipped   int   // kept before it
	Projected int64 // bytes the units not yet kept will take
	Bytes     int64 // bytes of every kept file (before the pass at Hooks.Start, after it at the end)
	Failed    []Failure
	// Stopped: Hooks.Stop closed before every unit was asked; the units
	// not kept are asked by the next pass.
	Stopped bool
}

// ErrStopped is Run's error when Hooks.Stop ended the pass early: every
// unit it kept is kept, the others are left for the next pass.
var ErrStopped = errors.New("hidden states: stopped before every unit was asked; run again to go on")

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// Recover makes outDir's hidden folder hold only kept files: a file moved
// in whose mark never became durable (a kill between the two), and a copy's
// temporary, are removed. It returns the open log.
func Recover(outDir string) (*Log, error) {
	dir := filepath.Join(outDir, DirName)
	if err := durable.MkdirAll(dir); err != nil {
		return nil, fmt.Errorf("hidden states: %w", err)
	}
	log, err := OpenLog(dir)
	if err != nil {
		return nil, err
	}
	kept := log.Files()
	entries, err := os.ReadDir(dir)
	if err != nil {
		log.Close()
		return nil, fmt.Errorf("hidden states: %w", err)
	}
	removed := false
	for _, e := range entries {
		n := e.Name()
		if n == LogName || n == FailedName {
			continue
		}
		if _, ok := kept[n]; ok {
			continue
		}
		if err := os.Remove(filepath.Join(dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			log.Close()
			return nil, fmt.Errorf("hidden states: remove unkept %s: %w", n, err)
		}
		removed = true
	}
	if removed {
		if err := durable.SyncDir(dir); err != nil {
			log.Close()
			return nil, err
		}
	}
	return log, nil
}

// Units reads every record of outDir's final data parts and lists their
// units in key order.
func Units(outDir string) ([]Unit, error) {
	dataDir := filepath.Join(outDir, "data")
	entries, err := os.ReadDir(dataDir)
	if err != nil {
		return nil, fmt.Errorf("hidden states: %w", err)
	}
	var us []Unit
	for _, e := range entries {
		p, ok := sink.ParsePart(e.Name())
		if !ok || p.Suffix != "" {
			continue
		}
		path := filepath.Join(dataDir, e.Name())
		err := sink.ForEachRecord(path, func(rec *sink.Record, _ sink.Span) error {
			us = append(us, UnitsOf(rec)...)
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("hidden states: %w", err)
		}
	}
	sort.SliceStable(us, func(i, j int) bool {
		if c := sink.CompareKeys(us[i].Key, us[j].Key); c != 0 {
			return c < 0
		}
		return us[i].Turn < us[j].Turn
	})
	return us, nil
}

// Project is the bytes the units not kept in log will take.
func Project(us []Unit, log *Log, layers, hidden int) int64 {
	var n int64
	for _, u := range us {
		if !log.Has(u) {
			n += int64(len(u.IDs)) * BytesPerToken(layers, hidden)
		}
	}
	return n
}

// Hooks are told what a pass does as it goes; a nil one is not called.
type Hooks struct {
	// Start is told the units and the projection once the space is checked,
	// before the first request.
	Start func(Result)
	// Kept is told every file kept, from the pass's workers (not at once).
	Kept func(Entry)
	// Failed is told every unit given up on, as Kept is.
	Failed func(Failure)
	// Error is told every attempt that failed (a bad file, an HTTP
	// error), retried or not, from the workers (perhaps at once).
	Error func(Unit, error)
	// Stop, once closed, drains the pass: no unit or attempt starts, the
	// attempts in flight finish (and keep their files, or leave nothing
	// kept), and Run returns ErrStopped. Nil: never.
	Stop <-chan struct{}
}

// Run is the pass over outDir's records: recover, project and refuse when
// the disk cannot hold the projection, extract every unit not kept, write
// the failures, sweep the server's leftovers. A full disk stops it with
// nothing half-kept; the error wraps ENOSPC.
func Run(ctx context.Context, outDir string, cfg Config, hooks Hooks) (Result, error) {
	if err := cfg.Check(); err != nil {
		return Result{}, err
	}
	cfg = cfg.withDefaults()
	// Files in the server's directory finished before now are no unit's
	// of this pass; the sweep at the end removes only those and its own.
	started := time.Now()
	log, err := Recover(outDir)
	if err != nil {
		return Result{}, err
	}
	defer log.Close()
	us, err := Units(outDir)
	if err != nil {
		return Result{}, err
	}
	res := Result{Units: len(us), Projected: Project(us, log, cfg.Layers, cfg.HiddenSize)}
	free, err := Free(filepath.Join(outDir, DirName))
	if err != nil {
		return res, err
	}
	if res.Projected > free {
		return res, fmt.Errorf("hidden states: %d bytes projected for %d units, %d free under %s", res.Projected, len(us), free, outDir)
	}
	for _, u := range us {
		if log.Has(u) {
			res.Skipped++
		}
	}
	res.Bytes = log.Bytes()
	if hooks.Start != nil {
		hooks.Start(res)
	}
	x := NewExtractor(cfg, outDir, log)
	x.stop, x.onError = hooks.Stop, hooks.Error
	err = extractAll(ctx, x, us, cfg.Workers, hooks, &res)
	res.Bytes = log.Bytes()
	if werr := writeFailed(outDir, res.Failed); err == nil {
		err = werr
	}
	if err != nil {
		return res, fmt.Errorf("hidden states: %w", err)
	}
	if err := Sweep(cfg.Dir, started); err != nil || !res.Stopped {
		return res, err
	}
	return res, ErrStopped
}

// extractAll runs x over every unit of us not kept, workers at once,
// counting into res; the error is what stops the pass (a cancelled ctx, a
// full disk), not a unit given up on (res.Failed) or a stop (res.Stopped).
func extractAll(ctx context.Context, x *Extractor, us []Unit, workers int, hooks Hooks, res *Result) error {
	var mu sync.Mutex
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(workers)
	for _, u := range us {
		if x.log.Has(u) {
			continue
		}
		if closed(hooks.Stop) {
			mu.Lock()
			res.Stopped = true
			mu.Unlock()
			break
		}
		g.Go(func() error {
			var e Entry
			err := ErrStopped
			if !closed(hooks.Stop) { // the stop may have come while this waited for a worker
				e, err = x.Extract(gctx, u)
			}
			mu.Lock()
			defer mu.Unlock()
			switch {
			case err == nil:
				res.Kept++
				if hooks.Kept != nil {
					hooks.Kept(e)
				}
			case errors.Is(err, ErrStopped):
				res.Stopped = true
			case gctx.Err() != nil, errors.Is(err, syscall.ENOSPC):
				return err
			default:
				f := Failure{ID: u.Key.ID, Sample: u.Key.Sample, Turn: u.Turn, Cause: err.Error()}
				res.Failed = append(res.Failed, f)
				if hooks.Failed != nil {
					hooks.Failed(f)
				}
			}
			return nil
		})
	}
	return g.Wait()
}

func writeFailed(outDir string, fails []Failure) error {
	sort.Slice(fails, func(i, j int) bool {
		a, b := fails[i], fails[j]
		if c := sink.CompareKeys(sink.Key{ID: a.ID, Sample: a.Sample}, sink.Key{ID: b.ID, Sample: b.Sample}); c != 0 {
			return c < 0
		}
		return a.Turn < b.Turn
	})
	var b strings.Builder
	for _, f := range fails {
		line, err := json.Marshal(f)
		if err != nil {
			return err
		}
		b.Write(line)
		b.WriteByte('\n')
	}
	return durable.WriteFile(filepath.Join(outDir, DirName, FailedName), []byte(b.String()), 0o644)
}

// Sweep removes from the server's directory every file last written before
// cutoff whose lock is free, and its lock: the files of generation requests
// (which the connector writes too) and of passes killed before the move.
// This pass's own bad files are removed as they are found. A file still
// locked is being written, and one written after cutoff may be another
// shard's pass's (several shards can share one server): both are left.
func Sweep(dir string, cutoff time.Time) error {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("sweep %s: %w", dir, err)
	}
	for _, e := range entries {
		n := e.Name()
		if !strings.HasSuffix(n, ".safetensors") {
			continue
		}
		path := filepath.Join(dir, n)
		info, err := e.Info()
		if err != nil || !info.ModTime().Before(cutoff) || held(path+".lock") {
			continue
		}
		if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fmt.Errorf("sweep: %w", err)
		}
		_ = os.Remove(path + ".lock")
	}
	// Locks whose file is gone (moved or removed) are left by the server.
	entries, err = os.ReadDir(dir)
	if err != nil {
		return fmt.Errorf("sweep %s: %w", dir, err)
	}
	for _, e := range entries {
		n := e.Name()
		if strings.HasSuffix(n, ".safetensors.lock") && !held(filepath.Join(dir, n)) {
			if _, err := os.Stat(filepath.Join(dir, strings.TrimSuffix(n, ".lock"))); errors.Is(err, fs.ErrNotExist) {
				_ = os.Remove(filepath.Join(dir, n))
			}
		}
	}
	return nil
}

// held reports whether another process (or descriptor) holds lock.
func held(lock string) bool {
	f, err := os.Open(lock)
	if err != nil {
		return false
	}
	defer f.Close()
	locked, err := lockedByOther(f)
	return locked || err != nil
}
