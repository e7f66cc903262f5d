package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ticketd/ticketd/sdk"
)

// Exit codes, so that scripts can tell a negative answer from a failure.
const (
	exitOK        = 0
	exitError     = 1 // any other failure, including bad usage
	exitLocked    = 2 // sdk.ErrLocked: the key is held by someone else
	exitNotHeld   = 3 // sdk.ErrNotHeld: no lock with that token (also "check": token not valid)
	exitAmbiguous = 4 // sdk.ErrAmbiguous: the request may or may not have taken effect
	// 5 is exitLeaseLost (run.go).
	exitDenied          = 6 // sdk.ErrPermissionDenied: the policy does not allow it, or the lock is another principal's
	exitUnauthenticated = 7 // sdk.ErrUnauthenticated: no accepted certificate or token
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes ticketctl with args and returns the process exit code.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *codeError
	if errors.As(err, &ee) && ee.err == nil {
		return ee.code // "lock run": the command's own status, nothing to add
	}
	fmt.Fprintln(stderr, "ticketctl:", err)
	return exitCode(err)
}

// exitCode maps an error to the process exit code.
func exitCode(err error) int {
	var ce *codeError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code // a command's own exit status (lock run, elect, --hold)
	case errors.Is(err, sdk.ErrAmbiguous):
		return exitAmbiguous
	case errors.Is(err, sdk.ErrLocked):
		return exitLocked
	case errors.Is(err, sdk.ErrNotHeld), errors.Is(err, errInvalidToken):
		return exitNotHeld
	case errors.Is(err, sdk.ErrPermissionDenied):
		return exitDenied
	case errors.Is(err, sdk.ErrUnauthenticated):
		return exitUnauthenticated
	}
	return exitError
}
