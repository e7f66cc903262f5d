package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/ticketd/ticketd/sdk"
)

// Exit codes, so that scripts can tell a negative answer from a failure and
// from a mistake in the command line. 2..8 are answers about the lock;
// usage mistakes exit 64 (EX_USAGE, sysexits.h), as etcdctl and consul keep
// usage apart from answers too. "lock run" and "elect" exit with their
// command's status otherwise, which may collide with these: read their
// stderr to tell (consul lock behaves the same).
const (
	exitOK        = 0
	exitError     = 1 // any other failure (unreachable cluster, TLS, I/O)
	exitLocked    = 2 // sdk.ErrLocked: the key is held by someone else (no --wait)
	exitNotHeld   = 3 // sdk.ErrNotHeld: no lock with that token (also "check": token not current); sdk.ErrSessionNotFound
	exitAmbiguous = 4 // sdk.ErrAmbiguous: the request may or may not have taken effect
	// 5 is exitLeaseLost (run.go).
	exitDenied          = 6  // sdk.ErrPermissionDenied: the policy does not allow it, or the lock is another principal's
	exitUnauthenticated = 7  // sdk.ErrUnauthenticated: no accepted certificate or token
	exitStillHeld       = 8  // --wait ran out: the key stayed held for --timeout (errStillHeld)
	exitUsage           = 64 // usageError: unknown command or flag, stray or missing argument, bad value
)

// exitCodesHelp documents the exit codes in --help (and doc.go, docs/api.md).
const exitCodesHelp = `Exit codes: 0 success; 1 failure (cluster unreachable, TLS, I/O); 2 key held
by someone else (no --wait); 3 no lock with that token (lease expired or
released; "check": token not current) or no such session; 4 outcome unknown (retry with the same
--owner); 5 lease lost (lock run, elect, session run, --hold: the command's
process group was stopped); 6 permission denied; 7 unauthenticated; 8 still
held when --wait ran out (--timeout); 64 usage (unknown command or flag,
stray or missing argument). "lock run", "elect" and "session run" otherwise
exit with their command's status, or 128+N when ticketctl got signal N.`

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes ticketctl with args and returns the process exit code. An
// error is printed on stderr: "ticketctl: " and one sentence, or with -o json
// one errorJSON object.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root, g := newRootCmd(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *codeError
	if errors.As(err, &ee) && ee.err == nil {
		return ee.code // "lock run": the command's own status, nothing to add
	}
	err = explainConn(err)
	code := exitCode(err)
	if g.output == outJSON {
		_ = json.NewEncoder(stderr).Encode(errorOf(err, code))
		return code
	}
	fmt.Fprintln(stderr, "ticketctl:", err)
	return code
}

// exitCode maps an error to the process exit code.
func exitCode(err error) int {
	var ce *codeError
	switch {
	case err == nil:
		return exitOK
	case errors.As(err, &ce):
		return ce.code // a command's own exit status (lock run, elect, --hold)
	case isUsage(err):
		return exitUsage
	case errors.Is(err, errStillHeld):
		return exitStillHeld
	case errors.Is(err, sdk.ErrAmbiguous):
		return exitAmbiguous
	case errors.Is(err, sdk.ErrLocked):
		return exitLocked
	case errors.Is(err, sdk.ErrNotHeld), errors.Is(err, errInvalidToken), errors.Is(err, sdk.ErrSessionNotFound):
		return exitNotHeld
	case errors.Is(err, sdk.ErrPermissionDenied):
		return exitDenied
	case errors.Is(err, sdk.ErrUnauthenticated):
		return exitUnauthenticated
	}
	return exitError
}
