package sdk

import (
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/h2hold"
)

// These tests run the built-in HTTP client (newHTTPClientOver) against
// real HTTP/2 servers on loopback, counting the system calls of its
// connections below the HEADERS hold.

// holdTestBound bounds every wait of these tests: long enough for a busy
// machine, and never the expected time of anything.
const holdTestBound = 30 * time.Second

// writeCounter dials TCP connections that count their writes.
type writeCounter struct{ writes atomic.Int64 }

func (w *writeCounter) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	c, err := (&net.Dialer{}).DialContext(ctx, network, addr)
	if err != nil {
		return nil, err
	}
	return &countedConn{Conn: c, w: w}, nil
}

type countedConn struct {
	net.Conn
	w *writeCounter
}

func (c *countedConn) Write(p []byte) (int, error) {
	c.w.writes.Add(1)
	return c.Conn.Write(p)
}

// getLockServer answers GetLock with the key it was asked for.
type getLockServer struct {
	ticketv1connect.UnimplementedLockServiceHandler
}

func (getLockServer) GetLock(_ context.Context, req *ticketv1.GetLockRequest) (*ticketv1.GetLockResponse, error) {
	return &ticketv1.GetLockResponse{Owner: req.GetKey()}, nil
}

// TestClientRequestInOneWrite: a unary call's request (a HEADERS frame,
// then a DATA frame with the message, which Go's HTTP/2 transport writes
// and flushes apart) leaves the client's h2c connection in one write. The
// hold lasts a minute here, so that a slow machine cannot make its timer
// write the headers alone.
func TestClientRequestInOneWrite(t *testing.T) {
	const calls = 20
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewLockServiceHandler(getLockServer{}))
	srv := NewH2CServer(mux)
	t.Cleanup(srv.Close)
	counter := &writeCounter{}
	hc := newHTTPClientOver(counter.dial, h2hold.Config{Hold: time.Minute}, DefaultKeepAlive, nil)
	t.Cleanup(hc.CloseIdleConnections)
	client := ticketv1connect.NewLockServiceClient(hc, srv.URL)
	ctx, cancel := context.WithTimeout(context.Background(), holdTestBound)
	defer cancel()
	call := func() {
		res, err := client.GetLock(ctx, &ticketv1.GetLockRequest{Key: "k"})
		require.NoError(t, err)
		require.Equal(t, "k", res.GetOwner())
	}
	call() // opens the connection (preface, settings)
	before := counter.writes.Load()
	for range calls {
		call()
	}
	perCall := float64(counter.writes.Load()-before) / calls
	t.Logf("client writes per call: %.2f", perCall)
	assert.Less(t, perCall, 1.5, "writes of the client's connection per unary call")
}

// TestClientStreamHeadersGoOut: a request whose body the caller has not
// written yet (a stream it will send on later) still has its headers
// delivered, by the hold's timer: the server answers with its own headers
// before reading the body, and the body written afterwards is echoed back
// whole.
func TestClientStreamHeadersGoOut(t *testing.T) {
	srv := NewH2CServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		_, _ = io.Copy(w, r.Body)
	}))
	t.Cleanup(srv.Close)
	// No keep-alive ping within the test: a ping's write would carry held
	// headers out too.
	hc := newHTTPClient(time.Hour, nil)
	t.Cleanup(hc.CloseIdleConnections)
	ctx, cancel := context.WithTimeout(context.Background(), holdTestBound)
	defer cancel()
	// A first request opens the connection and ends its SETTINGS exchange,
	// whose acknowledgement would otherwise carry held headers out.
	warm, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/warm", bytes.NewReader([]byte("x")))
	require.NoError(t, err)
	res, err := hc.Do(warm)
	require.NoError(t, err)
	_, err = io.Copy(io.Discard, res.Body)
	require.NoError(t, err)
	require.NoError(t, res.Body.Close())

	body, send := io.Pipe()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, srv.URL+"/stream", body)
	require.NoError(t, err)
	res, err = hc.Do(req) // returns once the server has answered the request's headers
	require.NoError(t, err, "the held request headers reach the server without a body after them")
	defer res.Body.Close()
	assert.Equal(t, 2, res.ProtoMajor)
	_, err = io.WriteString(send, "later")
	require.NoError(t, err)
	require.NoError(t, send.Close())
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, "later", string(got))
}

// TestClientHoldKeepsEveryByte: through the built-in client, bodies of
// every size are echoed whole over h2c (held) and over TLS (not held).
func TestClientHoldKeepsEveryByte(t *testing.T) {
	echo := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = io.Copy(w, r.Body) })
	plain := NewH2CServer(echo)
	t.Cleanup(plain.Close)
	tlsSrv := httptest.NewUnstartedServer(echo)
	tlsSrv.EnableHTTP2 = true
	tlsSrv.StartTLS()
	t.Cleanup(tlsSrv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), holdTestBound)
	defer cancel()
	for _, target := range []struct {
		url string
		hc  *http.Client
	}{
		{plain.URL, newHTTPClient(DefaultKeepAlive, nil)},
		{tlsSrv.URL, newHTTPClient(DefaultKeepAlive, tlsSrv.Client().Transport.(*http.Transport).TLSClientConfig)},
	} {
		for _, body := range [][]byte{[]byte("x"), bytes.Repeat([]byte("0123456789abcdef"), 100), bytes.Repeat([]byte("b"), 70_000)} {
			req, err := http.NewRequestWithContext(ctx, http.MethodPost, target.url+"/echo", io.MultiReader(bytes.NewReader(body[:len(body)/2]), bytes.NewReader(body[len(body)/2:])))
			require.NoError(t, err)
			res, err := target.hc.Do(req)
			require.NoError(t, err)
			got, err := io.ReadAll(res.Body)
			require.NoError(t, res.Body.Close())
			require.NoError(t, err)
			assert.Equal(t, 2, res.ProtoMajor, target.url)
			assert.True(t, bytes.Equal(body, got), "%s: a body of %d bytes came back changed", target.url, len(body))
		}
		target.hc.CloseIdleConnections()
	}
}
