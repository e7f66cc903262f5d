package httpapi_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// answeredEventually sends GetLock on a fresh connection each try until one
// is answered or ctx ends; a refused connection (the cap) is retried.
func answeredEventually(ctx context.Context, addr string) error {
	for {
		cli := nodetest.H2CClient()
		lc := ticketv1connect.NewLockServiceClient(cli, "http://"+addr)
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		_, err := lc.GetLock(rctx, &ticketv1.GetLockRequest{Key: "probe"})
		cancel()
		cli.CloseIdleConnections()
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("never answered: %w", err)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// stallH2 opens its own HTTP/2 connection and starts an Acquire whose
// announced body is never sent; it returns when the server ends the request.
func stallH2(ctx context.Context, addr string) error {
	pr, pw := io.Pipe()
	defer pw.Close()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/ticket.v1.LockService/Acquire", pr)
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.ContentLength = 1000
	cli := nodetest.H2CClient()
	defer cli.CloseIdleConnections()
	res, err := cli.Do(req)
	if err == nil {
		_, err = io.Copy(io.Discard, res.Body)
		res.Body.Close()
	}
	return err
}

// trickleH1 sends an HTTP/1.1 Acquire whose body comes one byte every
// 100 ms; it returns when the server answers or closes the connection.
func trickleH1(ctx context.Context, addr string) error {
	c, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer c.Close()
	if _, err := fmt.Fprintf(c, "POST /ticket.v1.LockService/Acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n"); err != nil {
		return err
	}
	cut := make(chan error, 1)
	go func() {
		_, err := c.Read(make([]byte, 1))
		cut <- err
	}()
	for range 1000 {
		select {
		case err := <-cut:
			return err
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
		if _, err := c.Write([]byte(" ")); err != nil {
			return err
		}
	}
	return nil
}

// The lockout attack: an attacker holds every slot of the cap with
// requests whose bodies never finish. A legitimate client must still be
// answered (once the body timeout cuts the stalled requests, their
// connections turn idle and make room), and every stalled request is cut
// rather than held open forever.
func TestBodyStallCannotLockOutConnections(t *testing.T) {
	const maxConns = 20
	for _, tc := range []struct {
		name  string
		stall func(context.Context, string) error
	}{
		{name: "h2_unsent_body", stall: stallH2},
		{name: "http1_trickle", stall: trickleH1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := nodetest.StartStandalone(t, func(c *config.Config) {
				c.Limits.MaxConnections = maxConns
				c.Limits.BodyReadTimeoutMS = 500
			})
			stallCtx, stopStalls := context.WithCancel(context.Background())
			defer stopStalls()
			var wg sync.WaitGroup
			var cut atomic.Int32
			for range maxConns {
				wg.Go(func() {
					if tc.stall(stallCtx, s.Addr); stallCtx.Err() == nil {
						cut.Add(1) // ended by the server, not by this test
					}
				})
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			require.NoError(t, answeredEventually(ctx, s.Addr), "a legitimate request is answered")
			stalled := make(chan struct{})
			go func() { wg.Wait(); close(stalled) }()
			select {
			case <-stalled:
			case <-ctx.Done():
			}
			stopStalls()
			<-stalled
			assert.Equal(t, int32(maxConns), cut.Load(), "every stalled request is cut by the body timeout")
			assert.False(t, heldAt(t, s.Addr, "probe"))
		})
	}
}

// Silent connections (never a byte: a stuck TLS handshake) hold no slot
// against a newcomer once past the grace period, and the newcomer is
// answered.
func TestSilentConnectionsYieldToNewcomer(t *testing.T) {
	const maxConns = 20
	s := nodetest.StartStandalone(t, func(c *config.Config) {
		c.Limits.MaxConnections = maxConns
		c.Limits.ReadHeaderTimeoutMS = 60_000 // only the cap may shed them
	})
	for range maxConns {
		c, err := net.Dial("tcp", s.Addr)
		require.NoError(t, err)
		t.Cleanup(func() { _ = c.Close() })
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	require.NoError(t, answeredEventually(ctx, s.Addr))
}

// With the cap reached and nobody waiting, no connection is closed: an idle
// keep-alive connection is reused for the next request.
func TestIdleConnectionKeptWhenNobodyWaits(t *testing.T) {
	s := nodetest.StartStandalone(t, func(c *config.Config) { c.Limits.MaxConnections = 1 })
	cli := nodetest.H2CClient()
	defer cli.CloseIdleConnections()
	lc := ticketv1connect.NewLockServiceClient(cli, "http://"+s.Addr)
	get := func() bool {
		var reused bool
		ctx := httptrace.WithClientTrace(ctxT(t), &httptrace.ClientTrace{GotConn: func(i httptrace.GotConnInfo) { reused = i.Reused }})
		_, err := lc.GetLock(ctx, &ticketv1.GetLockRequest{Key: "k"})
		require.NoError(t, err)
		return reused
	}
	get()
	time.Sleep(300 * time.Millisecond) // the old accept loop shed idle connections every 50 ms
	assert.True(t, get(), "the idle connection was kept and reused")
}
