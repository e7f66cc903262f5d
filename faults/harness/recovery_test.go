//go:build faults

package harness_test

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/faults/harness"
	"github.com/ticketd/ticketd/faults/history"
	"github.com/ticketd/ticketd/faults/nemesis"
)

// TestRecovery: the time to recover is from a fault's end to the return of
// the first acknowledged write called after it, worst per kind; reads,
// failed writes and writes called before the end do not count.
func TestRecovery(t *testing.T) {
	s := int64(time.Second)
	ev := func(k nemesis.Kind, end int64, err string) nemesis.Event {
		return nemesis.Event{Fault: nemesis.Fault{Kind: k}, Start: end - s, End: end, Err: err}
	}
	op := func(k history.Kind, o history.Outcome, call, ret int64) history.Op {
		return history.Op{Kind: k, Outcome: o, Call: call, Return: ret}
	}
	events := []nemesis.Event{
		ev(nemesis.LinkDown, 10*s, ""),
		ev(nemesis.LinkDown, 20*s, ""),
		ev(nemesis.KillLeader, 30*s, ""),
		ev(nemesis.MoveNode, 40*s, "refused"),
	}
	ops := []history.Op{
		op(history.Acquire, history.OK, 9*s, 11*s),    // called before the first heal
		op(history.Get, history.OK, 10*s, 10*s+1),     // a read
		op(history.Acquire, history.OK, 10*s, 12*s),   // first link-down: 2s
		op(history.Renew, history.Fail, 20*s, 21*s),   // refused
		op(history.Release, history.OK, 21*s, 25*s),   // second link-down: 5s
		op(history.Renew, history.OK, 30*s, 30*s+s/2), // kill-leader: 0.5s
	}
	require.Equal(t, map[nemesis.Kind]time.Duration{
		nemesis.LinkDown:   5 * time.Second,
		nemesis.KillLeader: 500 * time.Millisecond,
	}, harness.Recovery(events, ops))
}
