package server

import (
	"sync"

	"go.uber.org/zap"
)

// failStop records the first fatal error of the node's Raft and hands it to
// whoever runs the node (Fatal). The zero value is ready to use.
type failStop struct {
	once sync.Once
	ch   chan error // buffered 1; holds the first fatal error
}

func (f *failStop) channel() chan error {
	f.once.Do(func() { f.ch = make(chan error, 1) })
	return f.ch
}

// trip records err unless an error was recorded already; it never blocks.
func (f *failStop) trip(err error) {
	select {
	case f.channel() <- err:
	default:
	}
}

// onFatal is the backend's OnFatal hook (backends.Config.OnFatal): this
// node's Raft has stopped for good. Health turns NOT_SERVING at once, so load
// balancers stop sending traffic, the error is logged, and Fatal delivers it
// to the process, which must exit non-zero (fail-stop: never half-alive).
// Called from a backend goroutine; it does not block.
func (n *Node) onFatal(err error) {
	n.http.Fail()
	n.log.Error("raft stopped on a fatal error; this node must exit", zap.Error(err))
	n.fatal.trip(err)
}

// Fatal returns a channel that receives the error that stopped this node's
// Raft for good (a failed apply, a storage failure), at most once. The
// process running the node must then Close it and exit non-zero; until then
// health reports NOT_SERVING and the backend refuses every request.
func (n *Node) Fatal() <-chan error { return n.fatal.channel() }
