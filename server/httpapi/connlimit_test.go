package httpapi_test

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptrace"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// capFileLimit sets this process's open-file limit to what is open now plus
// extra, restoring it after the test: a node without a connection cap then
// runs out of descriptors under the flood, as a real one does at 20,000.
func capFileLimit(t *testing.T, extra uint64) {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip("no /proc/self/fd")
	}
	var lim syscall.Rlimit
	require.NoError(t, syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim))
	want := uint64(len(fds)) + extra
	if lim.Max < want {
		t.Skipf("hard open-file limit %d < %d", lim.Max, want)
	}
	old := lim
	lim.Cur = want
	require.NoError(t, syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim))
	t.Cleanup(func() { _ = syscall.Setrlimit(syscall.RLIMIT_NOFILE, &old) })
}

func TestIdleConnectionFloodLeavesAPIAnswering(t *testing.T) {
	const maxConns, idle = 200, 3000
	s := nodetest.StartStandalone(t, func(c *config.Config) {
		c.Limits.MaxConnections = maxConns
		c.Limits.ReadHeaderTimeoutMS = 60_000 // only the cap may shed them here
	})
	// Room for the idle connections' client ends, the capped server ends
	// and the real request; not for a server end per idle connection.
	capFileLimit(t, idle+maxConns+200)
	var conns []net.Conn
	t.Cleanup(func() {
		for _, c := range conns {
			_ = c.Close()
		}
	})
	for range idle {
		c, err := net.Dial("tcp", s.Addr) // the kernel completes the handshake even when not accepted
		require.NoError(t, err)
		conns = append(conns, c)
	}
	// Connections refused while every slot had just opened are retried, as
	// a client does; the silent ones past stateNewGrace make room.
	require.NoError(t, answeredEventually(ctxT(t), s.Addr), "a real request is answered despite %d idle connections", idle)
}

func TestSlowBodyIsCut(t *testing.T) {
	s := nodetest.StartStandalone(t, func(c *config.Config) { c.Limits.BodyReadTimeoutMS = 300 })
	c, err := net.Dial("tcp", s.Addr)
	require.NoError(t, err)
	defer c.Close()
	body := `{"key":"slow","leaseMs":"10000","owner":"o"}`
	_, err = fmt.Fprintf(c, "POST /ticket.v1.LockService/Acquire HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n", len(body))
	require.NoError(t, err)
	// Trickle the body one byte at a time, slower than the timeout allows:
	// the server must cut the request instead of holding it open.
	cut := false
	for i := 0; i < len(body) && !cut; i++ {
		if _, err := c.Write([]byte{body[i]}); err != nil {
			cut = true
			break
		}
		time.Sleep(100 * time.Millisecond)
		_ = c.SetReadDeadline(time.Now().Add(time.Millisecond))
		if line, err := bufio.NewReader(c).ReadString('\n'); err == nil || !isTimeout(err) {
			cut = cut || err != nil || !strings.Contains(line, "200")
		}
	}
	require.True(t, cut, "a body sent at ten bytes a second was read to the end")
	held := heldAt(t, s.Addr, "slow")
	assert.False(t, held, "the cut request changed nothing")
}

func isTimeout(err error) bool {
	ne, ok := err.(net.Error)
	return ok && ne.Timeout()
}

func heldAt(t *testing.T, addr, key string) bool {
	t.Helper()
	lc := ticketv1connect.NewLockServiceClient(nodetest.H2CClient(), "http://"+addr)
	res, err := lc.GetLock(ctxT(t), &ticketv1.GetLockRequest{Key: key})
	require.NoError(t, err)
	return res.GetHeld()
}

func TestOversizedHeadersRefused(t *testing.T) {
	s := nodetest.StartStandalone(t, func(c *config.Config) { c.Limits.MaxHeaderBytes = 4096 })
	req, err := http.NewRequest(http.MethodPost, "http://"+s.Addr+"/ticket.v1.LockService/GetLock", strings.NewReader(`{}`))
	require.NoError(t, err)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("X-Big", strings.Repeat("a", 64<<10))
	res, err := http.DefaultClient.Do(req)
	require.NoError(t, err)
	res.Body.Close()
	assert.Equal(t, http.StatusRequestHeaderFieldsTooLarge, res.StatusCode)
}

// TestSlowBodyStreamsAreCutPerStream (docs/security.md#threat-model): one
// HTTP/2 connection (h2c, and h2 over TLS) opens as many streams as the node
// allows by default, each announcing a request body it never sends. The
// node keeps answering another client meanwhile, cuts every one of those
// streams after limits.body_read_timeout_ms, and the connection's next
// request then gets a stream and an answer.
func TestSlowBodyStreamsAreCutPerStream(t *testing.T) {
	streams := config.DefaultConfig().Limits.MaxConcurrentStreams
	require.Equal(t, 250, streams, "default HTTP/2 streams per connection")
	for _, tc := range []struct {
		name string
		tls  bool
	}{
		{"h2c", false},
		{"h2_over_tls", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pki nodetest.PKI
			if tc.tls {
				pki = nodetest.NewPKI(t)
			}
			s := nodetest.StartStandalone(t, func(c *config.Config) {
				c.Limits.BodyReadTimeoutMS = 500
				if tc.tls {
					pki.SecureConfig(c)
				}
			})
			scheme := "http://"
			client := func(dials *atomic.Int32) *http.Client {
				tr := &http.Transport{
					Protocols: new(http.Protocols),
					// One connection: a request beyond the streams the node
					// allows waits for a stream instead of dialling anew.
					HTTP2: &http.HTTP2Config{StrictMaxConcurrentRequests: true},
					DialContext: func(ctx context.Context, network, addr string) (net.Conn, error) {
						dials.Add(1)
						return (&net.Dialer{}).DialContext(ctx, network, addr)
					},
				}
				if tc.tls {
					tr.Protocols.SetHTTP2(true)
					tr.TLSClientConfig = pki.ClientTLS(true)
				} else {
					tr.Protocols.SetUnencryptedHTTP2(true)
				}
				t.Cleanup(tr.CloseIdleConnections)
				return &http.Client{Transport: tr}
			}
			if tc.tls {
				scheme = "https://"
			}
			getLock := func(c *http.Client) error {
				ctx, cancel := context.WithTimeout(ctxT(t), safety)
				defer cancel()
				req, err := http.NewRequestWithContext(ctx, http.MethodPost, scheme+s.Addr+"/ticket.v1.LockService/GetLock", strings.NewReader(`{"key":"k"}`))
				if err != nil {
					return err
				}
				req.Header.Set("Content-Type", "application/json")
				res, err := c.Do(req)
				if err != nil {
					return err
				}
				defer res.Body.Close()
				if res.StatusCode != http.StatusOK {
					return fmt.Errorf("GetLock: %s", res.Status)
				}
				return nil
			}

			var attackerDials, otherDials atomic.Int32
			attacker := client(&attackerDials)
			require.NoError(t, getLock(attacker), "first request (learns the node's SETTINGS)")

			var opened, finished sync.WaitGroup
			var pipes []*io.PipeWriter
			t.Cleanup(func() {
				for _, pw := range pipes {
					_ = pw.Close()
				}
			})
			opened.Add(streams)
			finished.Add(streams)
			for range streams {
				pr, pw := io.Pipe()
				pipes = append(pipes, pw)
				trace := &httptrace.ClientTrace{WroteHeaders: opened.Done}
				// No deadline of the client's own: only the node may end it.
				req, err := http.NewRequestWithContext(httptrace.WithClientTrace(t.Context(), trace), http.MethodPost,
					scheme+s.Addr+"/ticket.v1.LockService/Acquire", pr)
				require.NoError(t, err)
				req.Header.Set("Content-Type", "application/json")
				req.ContentLength = 64 // announced, never sent
				go func() {
					defer finished.Done()
					if res, err := attacker.Do(req); err == nil {
						_, _ = io.Copy(io.Discard, res.Body)
						res.Body.Close()
					}
				}()
			}
			require.True(t, waitGroupWithin(&opened, safety), "%d slow streams opened", streams)

			// Another client is answered while every stream of the
			// attacker's connection is held.
			require.NoError(t, getLock(client(&otherDials)), "another client while %d slow streams are open", streams)

			// Every slow stream is cut, and the attacker's connection takes
			// a new request again (it waits for a free stream until then).
			require.True(t, waitGroupWithin(&finished, safety), "slow streams cut after the body read timeout")
			require.NoError(t, getLock(attacker), "a request on the same connection after the cut")
			assert.Equal(t, int32(1), attackerDials.Load(), "the attacker used one connection")
		})
	}
}

// waitGroupWithin waits for wg, at most d; it reports whether wg finished.
func waitGroupWithin(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(d):
		return false
	}
}
