package server_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// cut is a partition the backends' DropMessage hook consults: every message
// to or from the node it names is dropped.
type cut struct {
	mu sync.Mutex
	id string
}

func (c *cut) set(id string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.id = id
}

func (c *cut) drop(from, to string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.id != "" && (from == c.id || to == c.id)
}

// TestWatchEndsOnSnapshotInstall: a follower is cut off while the leader
// releases and renews locks (no grant, so no fencing-token jump the hub
// could notice) and compacts its log past them; after healing, the
// follower catches up by installing the leader's snapshot. Its watchers
// must be ended with OutOfRange (with the oldest index kept) before any
// later event: a watcher that went on to see the next grant would have
// missed the releases silently. The follower's lessor tracks exactly the
// locks the restored table holds.
func TestWatchEndsOnSnapshotInstall(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			var part cut
			c := nodetest.Start(t, 3,
				nodetest.WithBackend(backend),
				nodetest.WithConfig(func(_ int, cfg *config.Config) { cfg.Raft.SnapshotThreshold = 20 }),
				nodetest.WithServerOptions(func(int) []server.Option {
					return []server.Option{server.WithBackendConfig(func(b *backends.Config) {
						b.TrailingLogs = 5
						b.DropMessage = part.drop
					})}
				}))
			ctx := ctxT(t)
			leader := c.Leader(t)
			f := c.Follower(t)

			var tokens []uint64
			for i := range 5 {
				res, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("k%d", i), LeaseMs: 60000, Owner: "o"})
				require.NoError(t, err)
				tokens = append(tokens, res.GetToken())
			}
			renewed, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "r", LeaseMs: 60000, Owner: "o"})
			require.NoError(t, err)

			stream, err := f.Lock.Watch(ctx, &ticketv1.WatchRequest{})
			require.NoError(t, err)
			defer func() { _ = stream.Close() }()
			receiveStarted(t, stream)
			probe, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "probe", LeaseMs: 60000, Owner: "o"})
			require.NoError(t, err)
			require.True(t, stream.Receive(), "watch on %s: %v", f.ID, stream.Err())
			require.Equal(t, probe.GetToken(), stream.Msg().GetToken())
			lastSeen := stream.Msg().GetIndex()

			part.set(f.ID)
			for i, tok := range tokens {
				_, err := leader.Lock.Release(ctx, &ticketv1.ReleaseRequest{Key: fmt.Sprintf("k%d", i), Token: tok})
				require.NoError(t, err)
			}
			for range 40 {
				_, err := leader.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: "r", Token: renewed.GetToken()})
				require.NoError(t, err)
			}
			st, err := leader.Cluster.Status(ctx, &ticketv1.StatusRequest{})
			require.NoError(t, err)
			part.set("")

			eventually(t, func() bool {
				fs, err := f.Cluster.Status(ctx, &ticketv1.StatusRequest{})
				return err == nil && fs.GetAppliedIndex() >= st.GetAppliedIndex()
			}, "the follower catches up")
			after, err := c.Leader(t).Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "after", LeaseMs: 60000, Owner: "o"})
			require.NoError(t, err)
			require.Equal(t, probe.GetToken()+1, after.GetToken(), "no grant while cut off: no token jump")

			for stream.Receive() {
				ev := stream.Msg()
				require.NotEqual(t, "after", ev.GetKey(), "the watcher saw a grant after a silent gap (last seen index %d, event %v)", lastSeen, ev)
				require.Equal(t, lastSeen+1, ev.GetIndex(), "events arrive without a gap before the end: %v", ev)
				lastSeen = ev.GetIndex()
			}
			err = stream.Err()
			require.Equal(t, connect.CodeOutOfRange.String(), connect.CodeOf(err).String(), "stream end: %v", err)
			var ce *connect.Error
			require.True(t, errors.As(err, &ce))
			var oldest uint64
			for _, d := range ce.Details() {
				if m, derr := d.Value(); derr == nil {
					if w, ok := m.(*ticketv1.WatchOutOfRange); ok {
						oldest = w.GetOldestIndex()
					}
				}
			}
			assert.Greater(t, oldest, lastSeen+1, "the detail names an oldest index past the missed entries")

			eventually(t, func() bool {
				fs, err := f.Cluster.Status(ctx, &ticketv1.StatusRequest{})
				return err == nil && fs.GetLeasesTracked() == 3
			}, "the follower tracks r, probe and after; k0..k4 are not")
		})
	}
}
