package hidden

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/synthgen/synthgen/mockserver/hiddenstates"
)

// gate holds every file from the from-th on until release, and says on
// held when n files are held: with the pass's 4 workers each waiting on
// its file's lock, the pass can start nothing more.
type gate struct {
	from, n  int64
	count    atomic.Int64
	held     chan struct{}
	released chan struct{}
	once     sync.Once
}

func newGate(from, n int64) *gate {
	return &gate{from: from, n: n, held: make(chan struct{}), released: make(chan struct{})}
}

func (g *gate) fn(n int64) {
	if n < g.from {
		return
	}
	if g.count.Add(1) == g.n {
		close(g.held)
	}
	<-g.released
}

func (g *gate) release() { g.once.Do(func() { close(g.released) }) }

// TestStopDrains: Stop closed while the 4 workers each wait on a file's
// lock starts no other unit; the 4 in flight finish and keep their files;
// Run says ErrStopped; the next pass asks only the units not kept, each
// once.
func TestStopDrains(t *testing.T) {
	out := writeRun(t, 30)
	g := newGate(11, 4)
	srv, cfg := connector(t, hiddenstates.Options{Gate: g.fn})
	t.Cleanup(g.release)
	stop := make(chan struct{})
	var res Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = Run(context.Background(), out, cfg, Hooks{Stop: stop})
	}()
	<-g.held
	close(stop)
	g.release()
	<-done
	if !errors.Is(err, ErrStopped) || !res.Stopped {
		t.Fatalf("Run = %+v, %v; want ErrStopped", res, err)
	}
	if res.Kept != 14 || len(res.Failed) != 0 || srv.Counts().Requests != 14 {
		t.Fatalf("result %+v after %d requests: want the 10 before the gate and the 4 in flight kept, nothing more asked", res, srv.Counts().Requests)
	}
	us, err := Units(out)
	if err != nil {
		t.Fatal(err)
	}
	again := run(t, out, cfg)
	if again.Skipped != 14 || again.Kept != len(us)-14 {
		t.Errorf("resume %+v: want %d kept before, the rest now", again, 14)
	}
	for _, u := range us {
		if n := srv.Asked(u.IDs); n != 1 {
			t.Errorf("%s asked %d times", u.FileName(), n)
		}
	}
	checkKept(t, out)
}

// TestStopRetriesNone: every file bad, Stop closed while the first 4 are
// in flight: their failed attempts are told to Error and not retried,
// none is given up on (the next pass asks them), and nothing is kept.
func TestStopRetriesNone(t *testing.T) {
	out := writeRun(t, 10)
	g := newGate(1, 4)
	srv, cfg := connector(t, hiddenstates.Options{Gate: g.fn, RateMismatch: 1})
	t.Cleanup(g.release)
	stop := make(chan struct{})
	var errs atomic.Int64
	var res Result
	var err error
	done := make(chan struct{})
	go func() {
		defer close(done)
		res, err = Run(context.Background(), out, cfg, Hooks{Stop: stop, Error: func(Unit, error) { errs.Add(1) }})
	}()
	<-g.held
	close(stop)
	g.release()
	<-done
	if !errors.Is(err, ErrStopped) || res.Kept != 0 || len(res.Failed) != 0 {
		t.Fatalf("Run = %+v, %v; want ErrStopped, nothing kept or failed", res, err)
	}
	if c := srv.Counts().Requests; c != 4 || errs.Load() != 4 {
		t.Errorf("%d requests, %d errors told; want the 4 in flight, none retried", c, errs.Load())
	}
	checkKeptNone(t, out)
}

func checkKeptNone(t *testing.T, out string) {
	t.Helper()
	log, err := ReadLog(out + "/" + DirName)
	if err != nil {
		t.Fatal(err)
	}
	if n := len(log.Files()); n != 0 {
		t.Errorf("%d files kept", n)
	}
	for _, n := range leftovers(t, out+"/"+DirName) {
		if n != LogName && n != FailedName {
			t.Errorf("%s left in %s", n, DirName)
		}
	}
}
