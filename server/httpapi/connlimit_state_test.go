package httpapi

import (
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// TestConnStateTakesNoSharedLock: the ConnState hook, called around every
// HTTP/2 request, records the state without the limiter's lock (held here
// for the whole call), and the victim choice reads what it recorded.
func TestConnStateTakesNoSharedLock(t *testing.T) {
	c := newConnLimiter(1, time.Minute)
	client, srv := net.Pipe()
	defer func() { _ = client.Close() }()
	lc := &limitedConn{Conn: srv, c: c}
	require.True(t, c.admit(lc))
	defer func() { _ = lc.Close() }()

	c.mu.Lock()
	done := make(chan struct{})
	go func() {
		c.connState(lc, http.StateActive)
		c.connState(lc, http.StateIdle)
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		c.mu.Unlock()
		t.Fatal("connState waited for the limiter's lock")
	}
	require.Equal(t, lc, c.oldest(time.Now()), "the idle connection is the one to close for room")
	c.mu.Unlock()
}
