package httpapi

import (
	"net/http"
	"time"
)

// withWriteLimit bounds how long a response may take to be written, whole:
// d after the request starts, a write that has not gone out fails, so a
// handler blocked sending to a caller that stopped reading (or never reads,
// and so never opens its flow-control window) returns, and what it held
// (its goroutine, the page it was sending) is freed. Over HTTP/2 the stream
// is reset (RST_STREAM) and the connection's other streams go on; over
// HTTP/1.x the connection's write deadline is set, so the connection is
// closed once it fires; net/http lifts it once the response is finished,
// so the connection's next request is not bounded by it. d <= 0 disables
// it.
//
// It is a limit on the whole response, not an idle timeout renewed at
// every write: a reader that takes a few bytes now and then would keep an
// idle timeout from ever firing. So it suits only calls whose answer is
// useless after a known time (PeerService: the caller's own deadline), not
// streams meant to stay open (Watch): those have a bound on each message
// instead (streamwrite.go), which a whole-response deadline set here
// composes with (streamwrite.go never sets a deadline of its own but to
// reset the stream).
func withWriteLimit(d time.Duration, h http.Handler) http.Handler {
	if d <= 0 {
		return h
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// net/http's writers, HTTP/1.x and HTTP/2, all take a deadline.
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(d))
		h.ServeHTTP(w, r)
	})
}
