package etcd

import "context"

// roundTrip is the one request/response exchange between a caller and the
// raft loop (Propose, ReadIndex, conf changes, leadership transfer): it
// hands req to the loop on in, then waits for the loop's answer on out. Both
// waits end early with ctx.Err() when ctx is done, or with the stop error
// once the loop has exited. out must be buffered so that the loop never
// blocks on a caller that has gone.
func roundTrip[Req, Resp any](ctx context.Context, n *Node, in chan<- Req, req Req, out <-chan Resp) (Resp, error) {
	var zero Resp
	select {
	case in <- req:
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-n.done:
		return zero, n.stoppedErr()
	}
	select {
	case resp := <-out:
		return resp, nil
	case <-ctx.Done():
		return zero, ctx.Err()
	case <-n.done:
		return zero, n.stoppedErr()
	}
}
