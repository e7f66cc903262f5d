package httpapi

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// TestHTTP1WriteLimitEndsUnreadResponse: an HTTP/1.1 client that asks for
// a response larger than the socket buffers hold and never reads it does
// not hold the handler: its write fails once the limit has passed since
// the first byte.
func TestHTTP1WriteLimitEndsUnreadResponse(t *testing.T) {
	const limit = 200 * time.Millisecond
	wrote := make(chan error, 1)
	srv := httptest.NewServer(withHTTP1WriteLimit(limit, nil, http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		chunk := make([]byte, 32<<10)
		var err error
		for n := 0; n < 256<<20 && err == nil; n += len(chunk) { // 256 MiB: far more than the kernel buffers
			_, err = w.Write(chunk)
		}
		wrote <- err
	})))
	defer srv.Close()
	conn, err := net.Dial("tcp", srv.Listener.Addr().String())
	require.NoError(t, err)
	defer conn.Close()
	_, err = fmt.Fprintf(conn, "GET /big HTTP/1.1\r\nHost: x\r\n\r\n")
	require.NoError(t, err)

	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	select {
	case err := <-wrote:
		require.Error(t, err, "the unread response's write failed")
	case <-ctx.Done():
		t.Fatal("the handler is still writing to a client that does not read")
	}
}

// TestHTTP1WriteLimitSparesWaitsAndStreams: a call that waits longer than
// the limit before its first byte (an Acquire in its queue) is answered
// whole, the next call on the same keep-alive connection too, and a stream
// procedure's response is not bounded here (streamwrite.go bounds it).
func TestHTTP1WriteLimitSparesWaitsAndStreams(t *testing.T) {
	const limit = 100 * time.Millisecond
	h := withHTTP1WriteLimit(limit, map[string]bool{"/stream": true}, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/wait" {
			time.Sleep(3 * limit) // as a queued Acquire waits: the bound has not started
		}
		_, bounded := w.(*http1Writer)
		_, _ = fmt.Fprintf(w, "bounded=%v", bounded)
	}))
	srv := httptest.NewServer(h)
	defer srv.Close()
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP1(true)
	defer tr.CloseIdleConnections()
	hc := &http.Client{Transport: tr}
	get := func(path string) string {
		resp, err := hc.Get(srv.URL + path)
		require.NoError(t, err)
		defer resp.Body.Close()
		assert.Equal(t, 1, resp.ProtoMajor)
		b, err := io.ReadAll(resp.Body)
		require.NoError(t, err)
		return string(b)
	}
	assert.Equal(t, "bounded=true", get("/wait"))
	time.Sleep(3 * limit) // idle on the keep-alive connection past the limit
	assert.Equal(t, "bounded=true", get("/next"))
	assert.Equal(t, "bounded=false", get("/stream"))
}
