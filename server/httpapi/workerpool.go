package httpapi

import (
	"net/http"
	"sync"
	"sync/atomic"
)

// This file runs the unary API calls, and the proposals the API detaches
// from its callers (a Grant, a session's KeepAlive round), on long-lived
// worker goroutines.
//
// net/http's HTTP/2 server starts a new goroutine for every request
// (http2serverConn.runHandler), and the API started one per detached
// proposal. A new goroutine starts with a small stack, and a unary call
// through the handler chain, connect, the interceptors, protobuf and the
// grant path needs several times that, so every request grew its stack
// three or four times, each growth copying the whole stack
// (runtime.copystack): under callgrind, about a quarter of the instructions
// of an Acquire+Release cycle. A worker keeps the stack it grew, so the
// jobs it runs after its first one grow nothing. This is the remedy of
// grpc-go's NumStreamWorkers server option and of fasthttp's worker pool
// for the same cost.
//
// HTTP/1.x requests stay where they are: net/http serves every request of
// an HTTP/1.x connection on that connection's goroutine, whose stack has
// grown already after its first request.
//
// A job waits for no worker: when every worker is busy (or the most,
// maxWorkers, are started) it runs on a goroutine of its own as before, so
// the pool changes nothing but where the code runs. Streaming calls (Watch,
// Snapshot) never take a worker: they would hold it for the stream's life.

// maxWorkers bounds the worker goroutines of one node's pool: about the
// concurrent unary calls and detached proposals of a node with every
// client waiting on a commit; each idle worker keeps a stack of some tens
// of KiB (the garbage collector halves the stack of a worker idle through a
// cycle).
const maxWorkers = 1024

// WorkerPool is a node's pool of workers. The zero value is not ready; use
// NewWorkerPool. Safe for concurrent use.
type WorkerPool struct {
	work    chan job        // unbuffered: a send succeeds only to an idle worker
	stop    chan struct{}   // closed by close: idle workers exit
	workers atomic.Int32    // started and not exited
	jobs    sync.Pool       // of *handlerJob
	unary   map[string]bool // the paths of the unary API procedures
}

// job is what a worker runs.
type job interface{ run() }

// funcJob is a function run by Go.
type funcJob func()

func (f funcJob) run() { f() }

// handlerJob is one request handed to a worker by wrap; done receives the
// panic value of the handler (nil when it returned).
type handlerJob struct {
	h    http.Handler
	w    http.ResponseWriter
	r    *http.Request
	done chan any
}

// NewWorkerPool returns a pool with no worker started yet.
func NewWorkerPool() *WorkerPool {
	return &WorkerPool{
		work:  make(chan job),
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

// Go runs fn on an idle worker, a new one, or, when maxWorkers are busy, a
// goroutine of its own; it does not wait for fn. A panic in fn ends the
// process, as it would on a goroutine of its own.
func (p *WorkerPool) Go(fn func()) { p.submit(funcJob(fn)) }

// submit hands j to an idle worker, or starts one with it, or reports
// false (maxWorkers are busy, nothing started) for wrap; Go then runs it
// on a goroutine of its own.
func (p *WorkerPool) submit(j job) bool {
	select {
	case p.work <- j:
		return true
	default:
	}
	if p.workers.Add(1) > maxWorkers {
		p.workers.Add(-1)
		if f, ok := j.(funcJob); ok {
			go f()
			return true
		}
		return false
	}
	go p.worker(j)
	return true
}

// wrap returns h served, for the unary API procedures over HTTP/2, on a
// worker of p (see above); the calling goroutine waits for it. A panic of
// the handler is raised again on the calling goroutine, so net/http handles
// it as before (http.ErrAbortHandler included).
func (p *WorkerPool) wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor < 2 || !p.unary[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		j := p.jobs.Get().(*handlerJob)
		j.h, j.w, j.r = h, w, r
		if !p.submit(j) {
			j.h, j.w, j.r = nil, nil, nil
			p.jobs.Put(j)
			h.ServeHTTP(w, r)
			return
		}
		recovered := <-j.done
		j.h, j.w, j.r = nil, nil, nil
		p.jobs.Put(j)
		if recovered != nil {
			panic(recovered)
		}
	})
}

// worker runs jobs until the pool is closed.
func (p *WorkerPool) worker(j job) {
	defer p.workers.Add(-1)
	for {
		j.run()
		select {
		case j = <-p.work:
		case <-p.stop:
			return
		}
	}
}

// run serves one request and answers the job: nil when the handler
// returned, its panic value when it panicked (the worker goes on), and nil
// as well when it called runtime.Goexit (the worker then ends, and the
// caller is not left waiting).
func (j *handlerJob) run() {
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
// after the HTTP server has shut down; a job submitted later still runs (on
// a worker that then ends).
func (p *WorkerPool) close() { close(p.stop) }
