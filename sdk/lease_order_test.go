package sdk_test

import (
	"net"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// testDoneBeforeServerExpiry: a client cut off from the cluster loses its
// lease (Done) at its own deadline — send time of its last acknowledged
// renewal + TTL − margin — while the servers still hold the lock, even when
// leadership moves twice during the lease (no server resets or shortens a
// deadline at failover; each measures from its own apply, after the client
// sent the request: docs/design.md#leases). The servers remove the lock
// only after Done.
func testDoneBeforeServerExpiry(t *testing.T, cl *ticketdtest.Cluster, eps []string) {
	const ttl = 2 * time.Second
	cut := &cutter{conns: map[net.Conn]struct{}{}}
	rec := &ackRecorder{}
	hc := cut.client()
	t.Cleanup(hc.CloseIdleConnections)
	a := newClient(t, eps, sdk.WithHTTPClient(hc), sdk.WithConnectOptions(connect.WithInterceptors(rec.interceptor())))
	ctx := testCtx(t)

	la, err := a.TryLock(ctx, "order/a", ttl)
	require.NoError(t, err)
	start := time.Now()
	require.Eventually(t, func() bool { n, _ := rec.since(start); return n >= 1 }, 4*ttl, 10*time.Millisecond, "no renewal")
	cut.setCut(true)
	_, lastAck := rec.since(time.Time{})

	for range 2 { // two leader changes during the lease
		_, err := cl.Cluster(cl.Leader(t)).TransferLeader(ctx, &ticketv1.TransferLeaderRequest{})
		require.NoError(t, err)
		cl.WaitLeader(t, 10*time.Second)
	}

	<-la.Done()
	doneAt := time.Now()
	assert.ErrorIs(t, la.Err(), sdk.ErrLeaseLost)
	got, err := cl.Lock(cl.Leader(t)).GetLock(ctx, &ticketv1.GetLockRequest{Key: "order/a"})
	require.NoError(t, err)
	require.True(t, got.GetHeld(), "the servers removed the lock before the client's Done closed")
	assert.Equal(t, la.Token(), got.GetToken())

	var goneAt time.Time
	require.Eventually(t, func() bool {
		got, err := cl.Lock(cl.Leader(t)).GetLock(ctx, &ticketv1.GetLockRequest{Key: "order/a"})
		if err == nil && !got.GetHeld() {
			goneAt = time.Now()
			return true
		}
		return false
	}, 10*ttl, 20*time.Millisecond, "the servers expire the lock")
	assert.True(t, goneAt.After(doneAt))
	assert.GreaterOrEqual(t, goneAt.Sub(lastAck), ttl, "expired before TTL after the last acknowledged renewal")
	t.Logf("Done closed %.3f TTLs after the last acknowledged renewal was sent; the servers removed the lock %.3f TTLs after it",
		float64(doneAt.Sub(lastAck))/float64(ttl), float64(goneAt.Sub(lastAck))/float64(ttl))
}
