package httpapi

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// emptyBody is a request body at EOF from the first read.
type emptyBody struct{}

func (emptyBody) Read([]byte) (int, error) { return 0, io.EOF }
func (emptyBody) Close() error             { return nil }

// stalledBody is a request body that sends nothing: a Read waits until
// Close (the body timeout's timer) and then fails.
type stalledBody struct {
	once   sync.Once
	closed chan struct{}
}

func newStalledBody() *stalledBody { return &stalledBody{closed: make(chan struct{})} }

func (b *stalledBody) Read([]byte) (int, error) {
	<-b.closed
	return 0, errors.New("body closed")
}

func (b *stalledBody) Close() error {
	b.once.Do(func() { close(b.closed) })
	return nil
}

// h2Call is an HTTP/2 API request with body.
func h2Call(body io.ReadCloser) *http.Request {
	r := h2Request("/ticket.v1.LockService/Release")
	r.Body = body
	return r
}

// TestBodyTimeoutReusesTimers checks that an HTTP/2 call whose body was
// read to EOF in time allocates nothing for its bound: its timedBody and
// timer are reused by the next call.
func TestBodyTimeoutReusesTimers(t *testing.T) {
	buf := make([]byte, 16)
	h := withBodyTimeout(time.Minute, time.Minute, nil, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		for err := error(nil); err == nil; {
			_, err = r.Body.Read(buf)
		}
	}))
	r, w := h2Call(emptyBody{}), httptest.NewRecorder()
	body := r.Body
	assert.Zero(t, testing.AllocsPerRun(100, func() {
		r.Body = body
		h.ServeHTTP(w, r)
	}))
}

// TestBodyTimeoutCutsAfterReuse checks that a body that never arrives is
// still cut, by a timer reused from a call read in time, and that a body
// whose timer fired is not reused (its expire may still be running).
func TestBodyTimeoutCutsAfterReuse(t *testing.T) {
	var readErr error
	var cut *timedBody
	h := withBodyTimeout(time.Millisecond, time.Minute, nil, http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		_, readErr = io.ReadAll(r.Body)
		cut, _ = r.Body.(*timedBody)
	}))
	h.ServeHTTP(httptest.NewRecorder(), h2Call(emptyBody{}))
	require.NoError(t, readErr)

	h.ServeHTTP(httptest.NewRecorder(), h2Call(newStalledBody()))
	require.ErrorIs(t, readErr, os.ErrDeadlineExceeded)
	require.NotNil(t, cut)
	for {
		idle, _ := timedBodies.Get().(*timedBody)
		if idle == nil {
			break
		}
		assert.NotSame(t, cut, idle, "a body whose timer fired was kept for reuse")
	}
}
