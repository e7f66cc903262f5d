package httpapi

import (
	"net/http"
	"time"
)

// withHTTP1WriteLimit bounds the writing of the response to an HTTP/1.x
// request for a unary call: once its first byte is written (WriteHeader,
// Write or Flush), the response must be out within d, or the pending write
// fails and net/http closes the connection. It is HTTP/1.x's counterpart of
// the HTTP/2 connection's WriteByteTimeout (serve.go): a client that never
// reads its socket and asks for a response larger than the socket buffers
// hold (a ListLocks page of large keys with many holders) would otherwise
// keep the connection's goroutine, and the connection's slot under
// limits.max_connections (busy connections are never shed), for as long as
// it liked (docs/security.md#stalled-readers). The bound starts at the
// first byte, not at the request, so that an Acquire waiting in its queue
// is not cut; net/http lifts the deadline once the response is finished,
// so the connection's next request is not bounded by it. Streams are
// bounded per message instead (streamwrite.go) and pass unchanged, as do
// HTTP/2 requests. d <= 0 disables it.
func withHTTP1WriteLimit(d time.Duration, streams map[string]bool, h http.Handler) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.ProtoMajor != 1 || streams[r.URL.Path] {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&http1Writer{ResponseWriter: w, limit: d}, r)
	})
}

// http1Writer sets its connection's write deadline to limit after the
// response's first byte.
type http1Writer struct {
	http.ResponseWriter
	limit time.Duration
	armed bool
}

// arm sets the write deadline, once.
func (w *http1Writer) arm() {
	if !w.armed {
		w.armed = true
		_ = http.NewResponseController(w.ResponseWriter).SetWriteDeadline(time.Now().Add(w.limit))
	}
}

func (w *http1Writer) WriteHeader(code int) {
	w.arm()
	w.ResponseWriter.WriteHeader(code)
}

func (w *http1Writer) Write(p []byte) (int, error) {
	w.arm()
	return w.ResponseWriter.Write(p)
}

// Flush sends what is buffered (http.Flusher), within the bound.
func (w *http1Writer) Flush() {
	w.arm()
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap lets http.ResponseController reach the connection's writer.
func (w *http1Writer) Unwrap() http.ResponseWriter { return w.ResponseWriter }
