package httpapi

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// safetyBound bounds the waits of these tests; no assertion depends on it.
const safetyBound = 30 * time.Second

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), safetyBound)
	t.Cleanup(cancel)
	return ctx
}

// countingListener counts the reads and writes of the connections it
// accepts: the system calls a server makes to take in what its clients
// sent and to answer them.
type countingListener struct {
	net.Listener
	reads, writes atomic.Int64
}

func (l *countingListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &countingConn{Conn: c, l: l}, nil
}

type countingConn struct {
	net.Conn
	l *countingListener
}

func (c *countingConn) Read(p []byte) (int, error) {
	c.l.reads.Add(1)
	return c.Conn.Read(p)
}

func (c *countingConn) Write(p []byte) (int, error) {
	c.l.writes.Add(1)
	return c.Conn.Write(p)
}

// serveEcho serves, on a loopback listener wrapped by wrap, the API's
// protocols (HTTP/1.1 and h2c) with a handler that answers each request
// with its body; it returns the server's address and the read counter.
func serveEcho(t *testing.T, wrap func(net.Listener) net.Listener) (string, *countingListener) {
	t.Helper()
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	counted := &countingListener{Listener: raw}
	srv := &http.Server{
		Protocols: protocols(),
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			_, _ = w.Write(body)
		}),
	}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(wrap(counted)) }()
	t.Cleanup(func() {
		_ = srv.Close()
		assert.ErrorIs(t, <-done, http.ErrServerClosed)
	})
	return raw.Addr().String(), counted
}

// echo posts body to addr with client and checks the answer is body.
func echo(ctx context.Context, client *http.Client, addr string, body []byte) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, "http://"+addr+"/echo", bytes.NewReader(body))
	if err != nil {
		return err
	}
	res, err := client.Do(req)
	if err != nil {
		return err
	}
	defer res.Body.Close()
	got, err := io.ReadAll(res.Body)
	if err != nil {
		return err
	}
	if res.StatusCode != http.StatusOK || !bytes.Equal(got, body) {
		return fmt.Errorf("status %d, %d bytes back of %d sent", res.StatusCode, len(got), len(body))
	}
	return nil
}

func h2cClient(t *testing.T) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{Protocols: &p}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestH2CCallsShareReads: concurrent small calls on one h2c connection (as
// an SDK client makes them) are taken in with fewer reads than calls. Read
// frame by frame, with no buffer, each call costs at least four reads (a
// header and a payload read for each of its HEADERS and DATA frames).
func TestH2CCallsShareReads(t *testing.T) {
	const clients, perClient = 32, 20
	addr, counted := serveEcho(t, readBufferedListener)
	client := h2cClient(t)
	ctx := testCtx(t)
	require.NoError(t, echo(ctx, client, addr, []byte("warm")), "one call opens the connection")
	before := counted.reads.Load()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			body := []byte(fmt.Sprintf(`{"key":"k%d","leaseMs":"10000","owner":"o"}`, i))
			for range perClient {
				if err := echo(ctx, client, addr, body); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		require.NoError(t, err)
	}
	perCall := float64(counted.reads.Load()-before) / (clients * perClient)
	t.Logf("reads per call: %.2f", perCall)
	assert.Less(t, perCall, 2.0, "reads of the server's connection per unary call")
}

// TestReadBufferKeepsEveryByte: through the buffer, bodies larger than it
// (read past it) and small ones arrive whole, on h2c and on HTTP/1.1
// (whose protocol net/http tells from the first bytes, which the buffer
// may have taken in already), and a client's end of stream still reaches
// the server.
func TestReadBufferKeepsEveryByte(t *testing.T) {
	addr, _ := serveEcho(t, readBufferedListener)
	ctx := testCtx(t)
	bodies := [][]byte{
		[]byte("x"),
		bytes.Repeat([]byte("0123456789abcdef"), 100),
		bytes.Repeat([]byte("b"), 3*readBufferBytes+17),
	}
	for _, client := range []*http.Client{h2cClient(t), {Transport: &http.Transport{}}} {
		for _, body := range bodies {
			require.NoError(t, echo(ctx, client, addr, body))
		}
		client.CloseIdleConnections()
	}

	// A raw HTTP/1.1 request whose connection is half-closed after it:
	// the server answers, then sees the end of the stream and closes.
	c, err := net.Dial("tcp", addr)
	require.NoError(t, err)
	defer c.Close()
	_, err = io.WriteString(c, "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello")
	require.NoError(t, err)
	require.NoError(t, c.(*net.TCPConn).CloseWrite())
	require.NoError(t, c.SetReadDeadline(time.Now().Add(safetyBound)))
	all, err := io.ReadAll(c)
	require.NoError(t, err, "the server closes after the client's end of stream")
	assert.True(t, strings.HasSuffix(string(all), "\r\n\r\nhello"), "answer: %q", all)
}

// TestReadBufferPassesErrors: a read deadline on an idle connection still
// fails the read with a timeout, and a closed connection reads as closed.
func TestReadBufferPassesErrors(t *testing.T) {
	raw, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer raw.Close()
	l := readBufferedListener(raw)
	client, err := net.Dial("tcp", raw.Addr().String())
	require.NoError(t, err)
	defer client.Close()
	server, err := l.Accept()
	require.NoError(t, err)
	defer server.Close()

	_, err = client.Write([]byte("abc"))
	require.NoError(t, err)
	require.NoError(t, server.SetReadDeadline(time.Now().Add(safetyBound)))
	p := make([]byte, 2)
	n, err := io.ReadFull(server, p)
	require.NoError(t, err)
	assert.Equal(t, "ab", string(p[:n]))

	require.NoError(t, server.SetReadDeadline(time.Now().Add(-time.Second)))
	n, err = server.Read(p)
	require.NoError(t, err, "a byte that arrived before the deadline is still read")
	assert.Equal(t, "c", string(p[:n]))
	_, err = server.Read(p)
	var ne net.Error
	require.True(t, errors.As(err, &ne) && ne.Timeout(), "past the deadline with nothing buffered: %v", err)

	require.NoError(t, client.Close())
	require.NoError(t, server.SetReadDeadline(time.Now().Add(safetyBound)))
	_, err = server.Read(p)
	assert.ErrorIs(t, err, io.EOF)
}
