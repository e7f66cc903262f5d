package watch

import (
	"errors"
	"fmt"
)

// Sentinel errors of package watch. Compare with errors.Is.
var (
	// ErrSlow: the watcher's buffer had no room for the events of the next
	// entry because its client did not keep up; it was ended, before any of
	// that entry's events, so that apply never waits. Resume from the index
	// after the last event received (ResourceExhausted on the wire).
	ErrSlow = errors.New("ticketd: watcher too slow; resume from the last index")
	// ErrTooManyWatchers: the node already serves its configured maximum of
	// watchers (ResourceExhausted on the wire).
	ErrTooManyWatchers = errors.New("ticketd: too many watchers on this node")
	// ErrClosed: the hub is shutting down with its node (Unavailable on the
	// wire); resume on another node from the index after the last event.
	ErrClosed = errors.New("ticketd: watch hub closed")
	// ErrCredentialsChanged: the node reloaded its policy or tokens (SIGHUP),
	// so every open watch was ended and must reconnect, to be authorized
	// again under the new policy (Unavailable on the wire); resume from the
	// index after the last event received.
	ErrCredentialsChanged = errors.New("ticketd: credentials reloaded; reconnect to resume the watch")
	// ErrCompacted: the requested start index is older than this node's
	// retained history; see *CompactedError for the oldest index kept
	// (OutOfRange on the wire).
	ErrCompacted = errors.New("ticketd: watch start index is no longer in the history")
)

// CompactedError is the error of a watch whose start index is older than the
// retained history (etcd's ErrCompacted). Its Is(ErrCompacted) is true.
type CompactedError struct {
	// StartIndex is the index asked for.
	StartIndex uint64
	// OldestIndex is the oldest index the node can still start a watch from:
	// every event at or after it is retained.
	OldestIndex uint64
}

// Error implements error.
func (e *CompactedError) Error() string {
	return fmt.Sprintf("%v: start index %d, oldest retained index %d", ErrCompacted, e.StartIndex, e.OldestIndex)
}

// Is reports whether target is ErrCompacted.
func (e *CompactedError) Is(target error) bool { return target == ErrCompacted }
