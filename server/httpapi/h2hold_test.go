package httpapi

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/h2hold"
)

// These tests run the API's plaintext listener stack (the read buffer over
// package h2hold's HEADERS hold, as Server.Serve builds it) under net/http's
// HTTP/2 server.

// holdingListener is the API's plaintext listener stack over counted.
func holdingListener(counted net.Listener) net.Listener {
	return readBufferedListener(h2hold.Listener(counted, h2hold.Config{WriteLimit: time.Minute}))
}

// TestH2CResponseInOneWrite: a response whose HEADERS frame the HTTP/2
// server flushed by itself, before the DATA frame was handed to it (what
// net/http does to a unary answer when its serve loop flushes before the
// handler's goroutine is back, and to every streamed answer), leaves the
// server's connection in one write, not one per frame; the client gets
// both intact. The handler makes the split certain: it waits until the
// server's flush of the headers has reached the connection before it
// writes the body. The hold lasts a minute here, so that a slow machine
// cannot make its timer write the headers alone.
func TestH2CResponseInOneWrite(t *testing.T) {
	const calls = 20
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	below := &countingListener{Listener: raw} // the connection's writes
	above := &countingListener{}              // the HTTP/2 server's flushes
	above.Listener = h2hold.Listener(below, h2hold.Config{Hold: time.Minute, WriteLimit: time.Minute})
	srv := &http.Server{
		Protocols: protocols(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			flushes := above.writes.Load()
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			for deadline := time.Now().Add(safetyBound); above.writes.Load() == flushes && time.Now().Before(deadline); {
				runtime.Gosched()
			}
			_, _ = io.WriteString(w, "body")
		}),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(readBufferedListener(above)) }()
	t.Cleanup(func() {
		_ = srv.Close()
		assert.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	client := h2cClient(t)
	ctx := testCtx(t)
	call := func() {
		req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+raw.Addr().String()+"/call", nil)
		require.NoError(t, err)
		res, err := client.Do(req)
		require.NoError(t, err)
		defer res.Body.Close()
		got, err := io.ReadAll(res.Body)
		require.NoError(t, err)
		require.Equal(t, "body", string(got))
	}
	call() // opens the connection (preface, settings)
	before := below.writes.Load()
	for range calls {
		call()
	}
	perCall := float64(below.writes.Load()-before) / calls
	t.Logf("writes per call: %.2f", perCall)
	assert.Less(t, perCall, 1.5, "writes of the server's connection per response")
}

// TestHoldKeepsEveryByte: through the hold, echoed bodies of every size
// arrive whole on h2c and on HTTP/1.1 (which the hold leaves alone).
func TestHoldKeepsEveryByte(t *testing.T) {
	addr, _ := serveEcho(t, holdingListener)
	ctx := testCtx(t)
	for _, client := range []*http.Client{h2cClient(t), {Transport: &http.Transport{}}} {
		for _, body := range [][]byte{[]byte("x"), bytes.Repeat([]byte("0123456789abcdef"), 100), bytes.Repeat([]byte("b"), 70_000)} {
			require.NoError(t, echo(ctx, client, addr, body))
		}
		client.CloseIdleConnections()
	}
}

// TestHeldHeadersOfAStreamGoOut: a stream that sends its headers and then
// nothing (a Watch waiting for a change) still has its headers delivered
// (the hold's timer writes them), and the body sent later arrives whole
// after them.
func TestHeldHeadersOfAStreamGoOut(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	release := make(chan struct{})
	srv := &http.Server{
		Protocols: protocols(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			w.(http.Flusher).Flush()
			select {
			case <-release:
				_, _ = io.WriteString(w, "later")
			case <-r.Context().Done():
			}
		}),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(holdingListener(raw)) }()
	t.Cleanup(func() {
		_ = srv.Close()
		assert.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	ctx := testCtx(t)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+raw.Addr().String()+"/watch", nil)
	require.NoError(t, err)
	res, err := h2cClient(t).Do(req) // returns once the headers have arrived
	require.NoError(t, err, "the held headers reach the client without a body after them")
	defer res.Body.Close()
	assert.Equal(t, http.StatusOK, res.StatusCode)
	close(release)
	got, err := io.ReadAll(res.Body)
	require.NoError(t, err)
	assert.Equal(t, "later", string(got))
}
