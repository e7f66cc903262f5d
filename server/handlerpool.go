package server

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// This file runs the unary API calls on long-lived worker goroutines.
//
// net/http's HTTP/2 server starts a new goroutine for every request
// (http2serverConn.runHandler). A new goroutine starts with a small stack,
// and a unary call through the handler chain, connect, the interceptors,
// protobuf and the grant path needs several times that, so every request
// grew its stack three or four times, each growth copying the whole stack
// (runtime.copystack): under callgrind, about a quarter of the instructions
// of an Acquire+Release cycle. A worker keeps the stack it grew, so the
// calls it serves after its first one grow nothing. This is the remedy of
// grpc-go's NumStreamWorkers server option and of fasthttp's worker pool
// for the same cost.
//
// HTTP/1.x requests stay where they are: net/http serves every request of
// an HTTP/1.x connection on that connection's goroutine, whose stack has
// grown already after its first request.
//
// A request waits for no worker: when every worker is busy (or the most,
// maxHandlerWorkers, are started) it runs on its own goroutine as before, so
// the pool changes nothing but where the handler runs. Streaming calls
// (Watch, Snapshot) never take a worker: they would hold it for the
// stream's life.

// maxHandlerWorkers bounds the worker goroutines of one node's pool: about
// the concurrent unary calls a node serves with every client waiting on a
// commit; each idle worker keeps a stack of some tens of KiB (the garbage
// collector halves the stack of a worker idle through a cycle).
const maxHandlerWorkers = 512

// handlerPool is a node's pool of API workers. The zero value is not ready;
// use newHandlerPool. Safe for concurrent use.
type handlerPool struct {
	work    chan *handlerJob // unbuffered: a send succeeds only to an idle worker
	stop    chan struct{}    // closed by close: idle workers exit
	workers atomic.Int32     // started and not exited
	jobs    sync.Pool        // of *handlerJob
	unary   map[string]bool  // the paths of the unary API procedures
}

// handlerJob is one request handed to a worker; done receives the panic
// value of the handler (nil when it returned).
type handlerJob struct {
	h    http.Handler
	w    http.ResponseWriter
	r    *http.Request
	done chan any
}

// newHandlerPool returns a pool with no worker started yet.
func newHandlerPool() *handlerPool {
	return &handlerPool{
		work:  make(chan *handlerJob),
		stop:  make(chan struct{}),
		jobs:  sync.Pool{New: func() any { return &handlerJob{done: make(chan any, 1)} }},
		unary: unaryProcedures(),
	}
}

// unaryProcedures returns the HTTP paths of the API's unary procedures
// (apiMethods without the streams).
func unaryProcedures() map[string]bool {
	paths := map[string]bool{}
	for path, m := range apiMethods() {
		if !m.IsStreamingClient() && !m.IsStreamingServer() {
			paths[path] = true
		}
	}
	return paths
}

// wrap returns h served, for the unary API procedures, on a worker of p
// (see above); the calling goroutine waits for it. A panic of the handler
// is raised again on the calling goroutine, so net/http handles it as
// before (http.ErrAbortHandler included).
func (p *handlerPool) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor < 2 || !p.unary[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		j := p.jobs.Get().(*handlerJob)
		j.h, j.w, j.r = h, w, r
		select {
		case p.work <- j:
		default:
			if !p.startWorker(j) {
				p.jobs.Put(j)
				h.ServeHTTP(w, r)
				return
			}
		}
		recovered := <-j.done
		j.h, j.w, j.r = nil, nil, nil
		p.jobs.Put(j)
		if recovered != nil {
			panic(recovered)
		}
	})
}

// startWorker starts a worker with first as its first job, unless
// maxHandlerWorkers are started; it reports whether it did.
func (p *handlerPool) startWorker(first *handlerJob) bool {
	if p.workers.Add(1) > maxHandlerWorkers {
		p.workers.Add(-1)
		return false
	}
	go p.worker(first)
	return true
}

// worker serves jobs until the pool is closed.
func (p *handlerPool) worker(j *handlerJob) {
	defer p.workers.Add(-1)
	for {
		serveJob(j)
		select {
		case j = <-p.work:
		case <-p.stop:
			return
		}
	}
}

// serveJob runs one job's handler and answers the job: nil when the
// handler returned, its panic value when it panicked (the worker goes on),
// and nil as well when it called runtime.Goexit (the worker then ends, and
// the caller is not left waiting).
func serveJob(j *handlerJob) {
	returned := false
	defer func() {
		if !returned {
			j.done <- recover()
		}
	}()
	j.h.ServeHTTP(j.w, j.r)
	returned = true
	j.done <- nil
}

// close ends the idle workers; a busy one ends after its job. Call it once,
// after the HTTP server has shut down.
func (p *handlerPool) close() { close(p.stop) }
