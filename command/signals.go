package command

import (
	"context"
	"errors"
	"os"
	"os/signal"
	"syscall"
)

// signalReceived is the cause of the main context's cancellation.
type signalReceived struct{ sig os.Signal }

func (s signalReceived) Error() string { return s.sig.String() + " signal received" }

// SignalContext is signal.NotifyContext for SIGINT and SIGTERM, with the
// signal as the context's cause, so that a command can exit as a shell would
// (128+n).
func SignalContext(parent context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancelCause(parent)
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
	go func() {
		select {
		case s := <-ch:
			cancel(signalReceived{s})
		case <-ctx.Done():
		}
	}()
	return ctx, func() {
		signal.Stop(ch)
		cancel(context.Canceled)
	}
}

// interruptedBy returns the signal that ended ctx, or nil.
func interruptedBy(ctx context.Context) os.Signal {
	var s signalReceived
	if errors.As(context.Cause(ctx), &s) {
		return s.sig
	}
	return nil
}

// signalStatus is a shell's exit status for a process killed by sig.
func signalStatus(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return exitFailure
}
