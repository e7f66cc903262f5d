package httpapi

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"runtime"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// holdingListener is the API's plaintext listener stack over counted: the
// read buffer over the HEADERS hold (as Server.Serve builds it).
func holdingListener(counted net.Listener) net.Listener {
	return readBufferedListener(headerHoldListener(counted, time.Minute))
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
	above.Listener = holdListener{Listener: below, limit: time.Minute, hold: time.Minute}
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

// TestLoneResponseHeaders: only a whole HEADERS frame of an odd stream,
// with END_HEADERS and without END_STREAM, is held.
func TestLoneResponseHeaders(t *testing.T) {
	frame := func(typ, flags byte, stream uint32, payload int) []byte {
		p := make([]byte, frameHeaderLen+payload)
		p[0], p[1], p[2] = byte(payload>>16), byte(payload>>8), byte(payload)
		p[3], p[4] = typ, flags
		p[5], p[6], p[7], p[8] = byte(stream>>24), byte(stream>>16), byte(stream>>8), byte(stream)
		return p
	}
	assert.True(t, loneResponseHeaders(frame(frameHeaders, flagEndHeaders, 1, 12)))
	assert.False(t, loneResponseHeaders(frame(frameHeaders, flagEndHeaders|flagEndStream, 1, 12)), "ends its stream: nothing follows")
	assert.False(t, loneResponseHeaders(frame(frameHeaders, 0, 1, 12)), "CONTINUATION follows")
	assert.False(t, loneResponseHeaders(frame(frameHeaders, flagEndHeaders, 2, 12)), "even stream")
	assert.False(t, loneResponseHeaders(frame(0x0, flagEndHeaders, 1, 12)), "DATA")
	assert.False(t, loneResponseHeaders(append(frame(frameHeaders, flagEndHeaders, 1, 12), 0)), "more than one frame")
	assert.False(t, loneResponseHeaders(frame(frameHeaders, flagEndHeaders, 1, 12)[:15]), "a partial frame")
	assert.False(t, loneResponseHeaders([]byte("HTTP/1.1 200 OK\r\n")))
}

// recordingConn is a net.Conn below the hold that records its writes and
// write deadlines, and fails writes once failing is set.
type recordingConn struct {
	net.Conn // nil: only the methods below are used
	mu       sync.Mutex
	log      []string // "write <bytes>" and "deadline set"/"deadline cleared", in order
	failing  bool
}

func (c *recordingConn) Read(p []byte) (int, error) { return copy(p, h2Preface), nil }

func (c *recordingConn) Write(p []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.failing {
		return 0, errors.New("broken pipe")
	}
	c.log = append(c.log, fmt.Sprintf("write %x", p))
	return len(p), nil
}

func (c *recordingConn) SetWriteDeadline(t time.Time) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if t.IsZero() {
		c.log = append(c.log, "deadline cleared")
	} else {
		c.log = append(c.log, "deadline set")
	}
	return nil
}

func (c *recordingConn) Close() error { return nil }

func (c *recordingConn) entries() []string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return slices.Clone(c.log)
}

// TestHoldTimerWrite: a held HEADERS frame that nothing follows is written
// alone by the timer under a deadline of its own, which it clears; the
// server's next write then gets its deadline set again; and once a timer's
// write has failed, every later write fails with that error.
func TestHoldTimerWrite(t *testing.T) {
	headers := []byte{0, 0, 1, frameHeaders, flagEndHeaders, 0, 0, 0, 1, 0x88}
	data := []byte{0, 0, 1, 0x0, flagEndStream, 0, 0, 0, 1, 'x'}
	raw := &recordingConn{}
	c := &headerHoldConn{Conn: raw, limit: time.Minute, hold: time.Millisecond}
	_, err := c.Read(make([]byte, 64))
	require.NoError(t, err)

	n, err := c.Write(headers)
	require.NoError(t, err)
	assert.Equal(t, len(headers), n)
	require.Eventually(t, func() bool { return len(raw.entries()) == 3 }, safetyBound, time.Millisecond,
		"the timer writes the held frame")
	assert.Equal(t, []string{"deadline set", fmt.Sprintf("write %x", headers), "deadline cleared"}, raw.entries())

	n, err = c.Write(data)
	require.NoError(t, err)
	assert.Equal(t, len(data), n)
	assert.Equal(t, []string{"deadline set", fmt.Sprintf("write %x", data)}, raw.entries()[3:],
		"the server's deadline, cleared by the timer, is set again")

	raw.mu.Lock()
	raw.failing = true
	raw.mu.Unlock()
	_, err = c.Write(headers)
	require.NoError(t, err, "held: nothing written yet")
	require.Eventually(t, func() bool {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.err != nil
	}, safetyBound, time.Millisecond, "the timer's write fails")
	_, err = c.Write(data)
	assert.ErrorContains(t, err, "broken pipe")
}
