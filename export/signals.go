package export

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"
)

// ErrInterrupted is the cause of an export a signal stopped.
var ErrInterrupted = errors.New("interrupted")

// watchSignals is the context of one export: SIGINT or SIGTERM cancels it
// (cause ErrInterrupted), says so on log, and the export removes its
// temporary; the signals are then the system's again, so a second one
// kills an export stuck in a write (its temporary is then the next
// export's to remove). A signal the process was started ignoring (a
// background job's SIGINT) stays ignored. stop ends the watch.
func watchSignals(parent context.Context, log io.Writer) (ctx context.Context, stop func()) {
	ctx, cancel := context.WithCancelCause(parent)
	sigs := make(chan os.Signal, 1)
	for _, sig := range []os.Signal{os.Interrupt, syscall.SIGTERM} {
		if !signal.Ignored(sig) {
			signal.Notify(sigs, sig)
		}
	}
	done := make(chan struct{})
	go func() {
		select {
		case sig := <-sigs:
			signal.Stop(sigs)
			cancel(fmt.Errorf("%w (%v)", ErrInterrupted, sig))
			// The terminal echoed "^C" where the cursor was: a new line.
			fmt.Fprintf(log, "\nexport: %v: stopping; what it wrote is removed (a second signal kills it at once)\n", sig)
		case <-done:
		}
	}()
	return watched{Context: ctx, parent: parent}, func() {
		close(done)
		signal.Stop(sigs)
		cancel(nil)
	}
}

// watched is the context a signal cancels, asking its parent first: each
// look at it is one look at the caller's context too (a test's context
// that counts them, or says it is cancelled without a Done channel).
type watched struct {
	context.Context
	parent context.Context
}

func (w watched) Err() error {
	if err := w.parent.Err(); err != nil {
		return err
	}
	return w.Context.Err()
}
