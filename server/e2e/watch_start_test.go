package e2e_test

import (
	"fmt"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// receiveStarted receives a raw Watch stream's TYPE_STARTED announcement
// and returns the index it starts after: changes made after this follow on
// the stream (docs/api.md#watch).
func receiveStarted(t *testing.T, stream *connect.ServerStreamForClient[ticketv1.WatchEvent]) uint64 {
	t.Helper()
	require.True(t, stream.Receive(), "watch: %v", stream.Err())
	require.Equal(t, ticketv1.WatchEvent_TYPE_STARTED, stream.Msg().GetType(), "the first message announces the start")
	return stream.Msg().GetIndex()
}

// TestWatchAfterPauseSeesEveryChangeAfterItsStart: a watch opened on a node
// that is paused (SIGSTOP) and resumed (SIGCONT), while the leadership
// change this causes settles, announces its start and then delivers every
// change after that start exactly once, in order; what it does not deliver
// was applied at or below its start (a late start, never a loss). The node
// paused is either the leader alone (the others elect a successor
// meanwhile) or the whole cluster until a 400 ms lease is lost, as the
// TypeScript suite's lease_lost_when_cluster_paused does before
// shared_holders.
//
// Three watchers of the prefix, through the SDK (which resumes a broken
// stream from where it stood): the reference, from an explicit start index
// taken before the pause, sees every change; the racer is opened on the
// paused node while it is paused, and the changes of shared_holders (two
// shared grants, two releases) are made as soon as it resumes, without
// waiting for any start; the waiter is opened on the same node afterwards
// and a marker is granted and released only once it announced its start, so
// it must see the marker. Each one's changes must be exactly the
// reference's after its announced start.
func TestWatchAfterPauseSeesEveryChangeAfterItsStart(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		cl := sdkClient(t, c)
		for round, pause := range []string{"leader", "cluster", "leader", "cluster"} {
			t.Run(fmt.Sprintf("%s_%d", pause, round), func(t *testing.T) {
				ctx := ctxT(t)
				prefix := fmt.Sprintf("p%d/s/", round)
				ref := watchOn(t, c, c.Running(), prefix, sdk.WithStartIndex(nextIndex(t, c)))
				served := c.Leader(t)
				var racer *recorder
				switch pause {
				case "leader":
					c.Stop(served)
					c.WaitLeader(t, safety) // a successor among the others
					racer = watchOn(t, c, []int{served}, prefix, sdk.WithStartedEvents())
					c.Cont(served)
				case "cluster":
					lease, err := cl.TryLock(ctx, fmt.Sprintf("p%d/lost", round), 400*time.Millisecond, sdk.WithLease(400*time.Millisecond))
					require.NoError(t, err)
					running := c.Running()
					for _, i := range running {
						c.Stop(i)
					}
					select {
					case <-lease.Done():
					case <-time.After(safety):
						t.Fatal("the lease outlived a paused cluster")
					}
					racer = watchOn(t, c, []int{served}, prefix, sdk.WithStartedEvents())
					for _, i := range running {
						c.Cont(i)
					}
				}

				key := prefix + "k"
				a, err := cl.TryLock(ctx, key, time.Minute, sdk.WithShared(), sdk.WithLease(time.Minute))
				require.NoError(t, err)
				b, err := cl.TryLock(ctx, key, time.Minute, sdk.WithShared(), sdk.WithLease(time.Minute))
				require.NoError(t, err)
				require.NoError(t, a.Unlock(ctx))
				require.NoError(t, b.Unlock(ctx))

				waiter := watchOn(t, c, []int{served}, prefix, sdk.WithStartedEvents())
				waiterStart := waiter.waitFor(t, 1, "the waiter's start")[0]
				require.Equal(t, sdk.EventStarted, waiterStart.Type, "the first event announces the start")
				m, err := cl.TryLock(ctx, prefix+"marker", time.Minute, sdk.WithLease(time.Minute))
				require.NoError(t, err)
				require.NoError(t, m.Unlock(ctx))

				want := []string{
					fmt.Sprintf("GRANTED %s %d", key, a.Token()), fmt.Sprintf("GRANTED %s %d", key, b.Token()),
					fmt.Sprintf("RELEASED %s %d", key, a.Token()), fmt.Sprintf("RELEASED %s %d", key, b.Token()),
					fmt.Sprintf("GRANTED %smarker %d", prefix, m.Token()), fmt.Sprintf("RELEASED %smarker %d", prefix, m.Token()),
				}
				all := ref.waitFor(t, len(want), "the reference's changes")
				require.Equal(t, want, describe(all), "the reference sees every change once, in order")
				requireInOrder(t, all)

				for _, w := range []struct {
					name string
					rec  *recorder
				}{{"racer", racer}, {"waiter", waiter}} {
					started := w.rec.waitFor(t, 1, w.name+"'s start")[0]
					require.Equal(t, sdk.EventStarted, started.Type, "%s: the first event announces the start", w.name)
					var after []sdk.Event
					for _, ev := range all {
						if ev.Index > started.Index {
							after = append(after, ev)
						}
					}
					got := w.rec.waitFor(t, 1+len(after), w.name+": the changes after its start")
					require.Equal(t, after, got[1:], "%s: every change after its start %d once, nothing at or below it", w.name, started.Index)
					t.Logf("%s started after index %d: %d of %d changes were before it", w.name, started.Index, len(all)-len(after), len(all))
				}
				require.GreaterOrEqual(t, len(waiter.snapshot()), 3, "the waiter sees the marker, made after its start")
			})
		}
	})
}
