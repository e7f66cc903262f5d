package workload

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
)

// setupAttempts and setupBackoff bound the retries of a setup call (taking
// the locks or sessions a workload then measures, not timed) that failed as
// unavailable: during an election a node answers "not leader" until a new
// leader is known, which on a loaded machine can take a few seconds.
const (
	setupAttempts = 20
	setupBackoff  = 50 * time.Millisecond
)

// retrySetup calls call until it succeeds, fails with another error than
// connect.CodeUnavailable, ctx ends, or setupAttempts calls failed; it
// waits attempt × setupBackoff between calls. call must be safe to repeat
// (an Acquire with a fixed owner is granted again to the same owner).
// Errors: call's last, or ctx's.
func retrySetup(ctx context.Context, call func() error) error {
	var err error
	for attempt := 1; attempt <= setupAttempts; attempt++ {
		if err = call(); err == nil || connect.CodeOf(err) != connect.CodeUnavailable {
			return err
		}
		t := time.NewTimer(time.Duration(attempt) * setupBackoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return errors.Join(err, ctx.Err())
		case <-t.C:
		}
	}
	return err
}
