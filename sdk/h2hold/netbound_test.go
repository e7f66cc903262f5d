package h2hold

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// These tests run net/http's HTTP/2 server (h2c, WriteByteTimeout set) on
// Conns with the same WriteLimit, over net.Pipe: a pipe buffers nothing,
// so every write of the server waits for the client's reads, and the
// bound the Conn keeps in place of net/http's per-write deadlines
// (armLocked) is what cuts or spares the connection.

// bufferedListener reads its connections through a 4 KiB bufio.Reader, as
// ticketd's API listener does above the Conns (server/httpapi,
// readbuffer.go): net/http's first read of a connection asks for 14
// bytes ("PRI * HTTP/2.0"), which the buffer turns into one read of
// everything the client sent, the whole preface included, so the Conn
// knows it carries HTTP/2.
type bufferedListener struct{ net.Listener }

func (l bufferedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &bufferedConn{Conn: c, r: bufio.NewReaderSize(c, 4<<10)}, nil
}

type bufferedConn struct {
	net.Conn
	r *bufio.Reader
}

func (c *bufferedConn) Read(p []byte) (int, error) { return c.r.Read(p) }

// pipeListener hands out the server ends of net.Pipes that dial makes.
type pipeListener struct {
	conns chan net.Conn
	done  chan struct{}
	once  sync.Once
}

func newPipeListener() *pipeListener {
	return &pipeListener{conns: make(chan net.Conn), done: make(chan struct{})}
}

func (l *pipeListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.done:
		return nil, net.ErrClosed
	}
}

func (l *pipeListener) Close() error {
	l.once.Do(func() { close(l.done) })
	return nil
}

func (l *pipeListener) Addr() net.Addr { return &net.UnixAddr{Name: "pipe", Net: "pipe"} }

func (l *pipeListener) dial(ctx context.Context) (net.Conn, error) {
	server, client := net.Pipe()
	select {
	case l.conns <- server:
		return client, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	case <-l.done:
		return nil, net.ErrClosed
	}
}

// slowReader is a client connection that, while slow is set, reads at
// most chunk bytes at a time, pause after each read: a reader that keeps
// moving, too slowly for one server write to finish within WriteLimit.
type slowReader struct {
	net.Conn
	slow  atomic.Bool
	chunk int
	pause time.Duration
}

func (c *slowReader) Read(p []byte) (int, error) {
	if !c.slow.Load() {
		return c.Conn.Read(p)
	}
	time.Sleep(c.pause)
	return c.Conn.Read(p[:min(len(p), c.chunk)])
}

// h2cServer serves body bytes of size ?n= (default 1) on Conns with
// limit as both WriteByteTimeout and WriteLimit, and returns a client
// whose dials are counted and whose connections are slowReaders.
func h2cServer(t *testing.T, limit time.Duration) (*http.Client, *atomic.Int32, func() *slowReader) {
	t.Helper()
	l := newPipeListener()
	protocols := new(http.Protocols)
	protocols.SetUnencryptedHTTP2(true)
	srv := &http.Server{
		Protocols: protocols,
		HTTP2:     &http.HTTP2Config{WriteByteTimeout: limit},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := strconv.Atoi(r.URL.Query().Get("n"))
			_, _ = w.Write(make([]byte, max(n, 1)))
		}),
	}
	var owned atomic.Bool // the server's Conn keeps the write bound (as of its last write)
	go func() { _ = srv.Serve(bufferedListener{ownedListener{Listener(l, Config{WriteLimit: limit}), &owned}}) }()
	t.Cleanup(func() { _ = srv.Close() })

	var dials atomic.Int32
	var last atomic.Pointer[slowReader]
	tr := &http.Transport{Protocols: protocols}
	tr.DialContext = func(ctx context.Context, _, _ string) (net.Conn, error) {
		c, err := l.dial(ctx)
		if err != nil {
			return nil, err
		}
		dials.Add(1)
		s := &slowReader{Conn: c, chunk: 512, pause: limit / 20}
		last.Store(s)
		return s, nil
	}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: safetyBound}
	require.NoError(t, get(t, client, 1))
	require.True(t, owned.Load(), "the server's Conn does not keep the write bound: the test would not test it")
	return client, &dials, last.Load
}

// ownedListener reports in owned whether the connection it accepted keeps
// its write bound itself (Conn.ownsWriteDeadline), as of its last write.
type ownedListener struct {
	net.Listener
	owned *atomic.Bool
}

func (l ownedListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &ownedConn{Conn: c.(*Conn), owned: l.owned}, nil
}

type ownedConn struct {
	*Conn
	owned *atomic.Bool
}

func (c *ownedConn) Write(p []byte) (int, error) {
	c.owned.Store(c.Conn.ownsWriteDeadline())
	return c.Conn.Write(p)
}

func get(t *testing.T, c *http.Client, n int) error {
	t.Helper()
	res, err := c.Get("http://pipe/?n=" + strconv.Itoa(n))
	if err != nil {
		return err
	}
	defer func() { _ = res.Body.Close() }()
	got, err := io.ReadAll(res.Body)
	if err == nil && len(got) != n {
		t.Fatalf("read %d bytes, want %d", len(got), n)
	}
	return err
}

// TestSlowReaderNotCut: a client that keeps reading, though one DATA
// frame takes it longer than WriteLimit, gets its whole response:
// WriteLimit bounds a write without progress (WriteByteTimeout's meaning),
// so each write net/http starts again after a partial one is bounded
// afresh.
func TestSlowReaderNotCut(t *testing.T) {
	const limit = 600 * time.Millisecond // a 16 KiB frame at 512 B per 30 ms takes 960 ms
	client, dials, conn := h2cServer(t, limit)
	conn().slow.Store(true)
	assert.NoError(t, get(t, client, 32<<10), "a moving reader was cut")
	assert.EqualValues(t, 1, dials.Load(), "one connection")
}

// TestIdleConnectionNotCutByStaleDeadline: a connection idle for several
// WriteLimits, whose write deadline has passed meanwhile, serves its next
// request: the bound is set again before the first write after the idle
// time.
func TestIdleConnectionNotCutByStaleDeadline(t *testing.T) {
	const limit = 100 * time.Millisecond
	client, dials, _ := h2cServer(t, limit)
	time.Sleep(5 * limit) // the time that passes is what is tested: the deadline set before goes stale
	require.NoError(t, get(t, client, 100<<10), "the first request after the idle time")
	assert.EqualValues(t, 1, dials.Load(), "the idle connection was reused, not replaced")
}

// TestHTTP1StalledReaderCut: an HTTP/1.1 connection through the same
// listener is not the Conn's to bound: the write deadline net/http sets
// for its response (Server.WriteTimeout) reaches the connection, and a
// client that sends a request and reads nothing has the response's write
// fail.
func TestHTTP1StalledReaderCut(t *testing.T) {
	l := newPipeListener()
	protocols := new(http.Protocols)
	protocols.SetHTTP1(true)
	protocols.SetUnencryptedHTTP2(true)
	writeErr := make(chan error, 1)
	srv := &http.Server{
		Protocols:    protocols,
		WriteTimeout: 200 * time.Millisecond,
		HTTP2:        &http.HTTP2Config{WriteByteTimeout: time.Hour},
		Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
			_, err := w.Write(make([]byte, 1<<20))
			writeErr <- err
		}),
	}
	go func() { _ = srv.Serve(bufferedListener{Listener(l, Config{WriteLimit: time.Hour})}) }()
	t.Cleanup(func() { _ = srv.Close() })

	c, err := l.dial(context.Background())
	require.NoError(t, err)
	defer func() { _ = c.Close() }()
	_, err = io.WriteString(c, "GET / HTTP/1.1\r\nHost: pipe\r\n\r\n")
	require.NoError(t, err)
	select {
	case err := <-writeErr:
		assert.ErrorIs(t, err, os.ErrDeadlineExceeded, "the response's write")
	case <-time.After(safetyBound):
		t.Fatal("an HTTP/1.1 response nobody reads was not cut by its write deadline")
	}
}
