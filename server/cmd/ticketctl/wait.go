package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"time"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/sdk"
)

// resolveTimeout bounds the look-up that settles a --wait acquire whose
// --timeout ran out.
const resolveTimeout = 5 * time.Second

// errStillHeld: a --wait acquire ran out of --timeout and the key was
// still held by someone else; nothing was acquired (exit 8).
var errStillHeld = errors.New("still held")

// stillHeldError reports a --wait acquire that ran out of time. Is
// matches errStillHeld; Unwrap gives the SDK's error.
type stillHeldError struct {
	key    string
	after  time.Duration // --timeout
	holder uint64        // holder's token; 0: the key was free when looked at
	cause  error
}

// Error implements error.
func (e *stillHeldError) Error() string {
	if e.holder == 0 {
		return fmt.Sprintf("%q not acquired within %v: it was held until then and is free now; nothing was acquired, retry", e.key, e.after)
	}
	return fmt.Sprintf("%q still held after %v (by token %d); nothing was acquired", e.key, e.after, e.holder)
}

// Is reports whether target is errStillHeld.
func (e *stillHeldError) Is(target error) bool { return target == errStillHeld }

// Unwrap returns the SDK's error.
func (e *stillHeldError) Unwrap() error { return e.cause }

// waitOwner returns owner, or for a --wait acquire without --owner a fresh
// owner id of ticketctl's own: knowing it lets settleWait tell our grant
// from someone else's when --timeout runs out.
func waitOwner(owner string) string {
	if owner != "" {
		return owner
	}
	host, _ := os.Hostname()
	if len(host) > 40 {
		host = host[:40]
	}
	var b [6]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s/%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}

// waitRanOut reports whether err ends a --wait acquire because waiting ran
// out: the server answered DeadlineExceeded, or --timeout ended the call
// (then the SDK says the outcome is unknown) while parent is still live
// (not Ctrl-C).
func waitRanOut(parent context.Context, err error) bool {
	if parent.Err() != nil {
		return false
	}
	return connect.CodeOf(err) == connect.CodeDeadlineExceeded || errors.Is(err, context.DeadlineExceeded)
}

// settleWait settles a --wait acquire of key by owner that failed with err
// when --timeout ran out (waitRanOut), instead of exiting 4 "outcome
// unknown": one linearizable GetLock tells. Held by owner: the grant came
// through at the last moment, and retake (an idempotent acquire with the
// same owner) fetches it; its error is returned. Otherwise nothing is ours
// (a grant still in flight is released by the server, whose client is
// gone): a *stillHeldError (exit 8). When the look-up itself fails, err is
// returned unchanged.
func (g *globals) settleWait(parent context.Context, c *sdk.Client, key, owner string, err error, retake func(ctx context.Context) error) error {
	if !waitRanOut(parent, err) {
		return err
	}
	ctx, cancel := context.WithTimeout(parent, resolveTimeout)
	defer cancel()
	info, gerr := c.GetLock(ctx, key)
	if gerr != nil {
		return err
	}
	if _, ok := info.HolderOf(owner); ok {
		return retake(ctx)
	}
	holder := info.Token
	if holder == 0 && len(info.Holders) > 0 { // shared or a semaphore: the newest holder
		holder = info.Holders[len(info.Holders)-1].Token
	}
	return &stillHeldError{key: key, after: g.timeout, holder: holder, cause: err}
}
