package httpapi

import (
	"bytes"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// h2Request is a POST to path as net/http's HTTP/2 server passes it on.
func h2Request(path string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, path, nil)
	r.Proto, r.ProtoMajor, r.ProtoMinor = "HTTP/2.0", 2, 0
	return r
}

// goroutineID is the id runtime.Stack prints for the calling goroutine.
func goroutineID() string {
	buf := make([]byte, 64)
	buf = buf[:runtime.Stack(buf, false)]
	id, _, _ := bytes.Cut(bytes.TrimPrefix(buf, []byte("goroutine ")), []byte(" "))
	return string(id)
}

// TestWorkerPoolReusesWorker: unary API calls, one after another, are
// served on one worker goroutine, not the caller's, so its grown stack is
// reused; a streaming call (Watch) and a path outside the API run on the
// caller's goroutine, as does any call over HTTP/1.1.
func TestWorkerPoolReusesWorker(t *testing.T) {
	p := NewWorkerPool()
	defer p.close()
	var ran []string
	h := p.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = append(ran, goroutineID()) }))
	call := func(path string) string {
		h.ServeHTTP(httptest.NewRecorder(), h2Request(path))
		return ran[len(ran)-1]
	}
	me := goroutineID()
	first := call(ticketv1connect.LockServiceAcquireProcedure)
	require.NotEqual(t, me, first, "a unary call runs on a worker")
	require.Equal(t, first, call(ticketv1connect.LockServiceReleaseProcedure), "the idle worker serves the next call")
	require.Equal(t, first, call(ticketv1connect.ClusterServiceStatusProcedure))
	require.Equal(t, me, call(ticketv1connect.LockServiceWatchProcedure), "a stream never takes a worker")
	require.Equal(t, me, call("/livez"))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodPost, ticketv1connect.LockServiceAcquireProcedure, nil))
	require.Equal(t, me, ran[len(ran)-1], "an HTTP/1.1 call stays on its connection's goroutine")
}

// TestWorkerPoolPanicReachesCaller: a handler's panic is raised again on
// the calling goroutine, as net/http expects (http.ErrAbortHandler aborts
// the response), and the worker goes on serving.
func TestWorkerPoolPanicReachesCaller(t *testing.T) {
	p := NewWorkerPool()
	defer p.close()
	fail := true
	h := p.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		if fail {
			panic(http.ErrAbortHandler)
		}
	}))
	req := func() {
		h.ServeHTTP(httptest.NewRecorder(), h2Request(ticketv1connect.LockServiceAcquireProcedure))
	}
	require.PanicsWithValue(t, http.ErrAbortHandler, req)
	fail = false
	require.NotPanics(t, req)
}

// TestWorkerPoolFullRunsInline: beyond maxWorkers busy workers, a
// call runs on its own goroutine instead of waiting for a worker.
func TestWorkerPoolFullRunsInline(t *testing.T) {
	p := NewWorkerPool()
	defer p.close()
	p.workers.Store(maxWorkers) // every worker busy
	var ran string
	h := p.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { ran = goroutineID() }))
	h.ServeHTTP(httptest.NewRecorder(), h2Request(ticketv1connect.LockServiceAcquireProcedure))
	require.Equal(t, goroutineID(), ran)
	p.workers.Store(0)
}

// TestWorkerPoolGoexitAnswersCaller: a handler that ends its goroutine
// (runtime.Goexit) ends the worker, not the caller's wait.
func TestWorkerPoolGoexitAnswersCaller(t *testing.T) {
	p := NewWorkerPool()
	defer p.close()
	h := p.wrap(http.HandlerFunc(func(http.ResponseWriter, *http.Request) { runtime.Goexit() }))
	done := make(chan struct{})
	go func() {
		h.ServeHTTP(httptest.NewRecorder(), h2Request(ticketv1connect.LockServiceAcquireProcedure))
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the caller still waits for a worker that ended")
	}
	require.Eventually(t, func() bool { return p.workers.Load() == 0 }, 30*time.Second, 10*time.Millisecond)
}

// TestWorkerPoolGo: Go runs its function on an idle worker, the same one
// for jobs one after another, and on a goroutine of its own when every
// worker is busy; it never runs it on the caller's goroutine.
func TestWorkerPoolGo(t *testing.T) {
	p := NewWorkerPool()
	defer p.close()
	ran := make(chan string)
	run := func() string {
		p.Go(func() { ran <- goroutineID() })
		return <-ran
	}
	me := goroutineID()
	first := run()
	require.NotEqual(t, me, first)
	require.Equal(t, first, run(), "the idle worker runs the next job")
	p.workers.Store(maxWorkers) // every worker busy
	require.NotEqual(t, me, run(), "with no worker free, a goroutine of its own")
	p.workers.Store(1)
}
