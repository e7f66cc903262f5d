package server

import (
	"context"
	"fmt"
	"time"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server/httpapi"
	"github.com/ticketd/ticketd/server/security"
	"github.com/ticketd/ticketd/server/watch"
)

// This file is LockService.Watch: a server stream of the changes this node
// applies (package watch), and the consistent table reads it and ListLocks
// share (a list and the log index it reflects).

// rangeTries bounds how often rangeAt re-reads a table that keeps changing.
const rangeTries = 100

// appliedPoll is how often waitApplied looks at the applied index.
const appliedPoll = 2 * time.Millisecond

// Watch streams the changes to locks under prefix, each with the log index
// that applied it, in apply order and exactly once (docs/api.md, Watch). By
// default the start is linearizable: the node first learns the leader's
// read index (a ListLocks through the leader, as a linearizable GetLock is
// served) and waits until it has applied it. Errors: InvalidArgument (prefix
// too long), OutOfRange with a WatchOutOfRange detail (start_index below the
// retained history), ResourceExhausted (too slow, or too many watchers),
// Unavailable (node shutting down, no leader). A principal at its watchers
// quota (docs/security.md#quotas) gets ResourceExhausted naming it. An
// event the client does not take within limits.stream_write_timeout_ms
// resets the stream (httpapi, streamwrite.go; docs/security.md#stalled-readers).
func (s *lockService) Watch(ctx context.Context, req *ticketv1.WatchRequest, stream *connect.ServerStream[ticketv1.WatchEvent]) error {
	return s.watch(ctx, req, stream.Send)
}

// watch is Watch with its stream's send: the linearizable start, then
// serveWatch, whose first message after the existing locks is a STARTED
// event with the index the watch starts after. Its errors are connect
// errors.
func (s *lockService) watch(ctx context.Context, req *ticketv1.WatchRequest, send func(*ticketv1.WatchEvent) error) error {
	n := s.n
	if len(req.GetPrefix()) > core.MaxKeyBytes {
		return n.toConnect(fmt.Errorf("%w: prefix is longer than %d bytes", core.ErrInvalidArgument, core.MaxKeyBytes))
	}
	if !req.GetStale() {
		res, err := s.ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: req.GetPrefix(), PageSize: 1})
		if err != nil {
			return err // already a connect error
		}
		if err := n.waitApplied(ctx, res.GetReadIndex()); err != nil {
			return n.toConnect(err)
		}
	}
	return n.toConnect(n.serveWatch(ctx, req, send))
}

// serveWatch registers a watcher for req and sends its events with send
// until the client goes (nil) or the hub ends it (its error). Once the
// watcher is registered it sends the response headers (send of nil), so a
// client's Watch call returns when the watch is in place; then the existing
// locks (include_existing), a STARTED event with the index the watch starts
// after, and the changes after it.
func (n *Node) serveWatch(ctx context.Context, req *ticketv1.WatchRequest, send func(*ticketv1.WatchEvent) error) error {
	principal := n.grantPrincipal(ctx)
	wreq := watch.Request{Prefix: req.GetPrefix(), StartIndex: req.GetStartIndex(),
		Principal: principal, Admit: n.quotaAdmit(principal, security.QuotaWatchers)}
	var existing []core.Lock
	var readAt uint64
	if req.GetIncludeExisting() {
		wreq.Snapshot = func() uint64 {
			existing, readAt = n.rangeAt(req.GetPrefix(), "", 0)
			return readAt
		}
	}
	w, err := n.hub.Watch(wreq)
	if err != nil {
		return err
	}
	defer w.Close()
	if err := send(nil); err != nil {
		return err
	}
	sendEv := func(ev watch.Event) error {
		if err := send(eventToProto(ev)); err != nil {
			return err
		}
		n.met.watchEvents.Inc()
		return nil
	}
	for _, lk := range existing {
		m := eventToProto(watch.Event{
			Type: watch.Granted, Key: lk.Key, Token: lk.Token, Owner: lk.Owner, LeaseMS: lk.LeaseMS,
			Mode: lk.Mode, Limit: lk.Limit, Session: lk.Session, Index: readAt,
		})
		m.Existing = true
		if err := send(m); err != nil {
			return err
		}
		n.met.watchEvents.Inc()
	}
	// Announce the start before any change, as etcd's first WatchResponse
	// (created, header.revision) does (docs/api.md#watch): every change
	// after this index follows, none at or below it.
	if err := send(&ticketv1.WatchEvent{Type: ticketv1.WatchEvent_TYPE_STARTED, Index: w.StartIndex() - 1}); err != nil {
		return err
	}
	for _, ev := range w.Backlog() {
		if err := sendEv(ev); err != nil {
			return err
		}
	}
	for {
		// An ended watcher goes first, before the events it still holds:
		// endWatch sends those under the bound of the stream's ending.
		select {
		case <-w.Done():
			return endWatch(ctx, w, sendEv)
		default:
		}
		select {
		case ev := <-w.Events():
			if err := sendEv(ev); err != nil {
				return err
			}
		case <-w.Done():
			return endWatch(ctx, w, sendEv)
		case <-ctx.Done():
			return nil
		}
	}
}

// endWatch sends the events w still holds after the hub ended it (too
// slow, node shutting down, history dropped), then returns why it ended.
// From here what the stream still writes, those events and its error, is
// bounded whole by one stream write limit (httpapi.StreamEnding), not by
// one limit per message: a watcher ended as too slow holds up to a full
// buffer, and a client reading just under the per-message limit would
// otherwise keep the handler and that buffer for as many limits.
func endWatch(ctx context.Context, w *watch.Watcher, sendEv func(watch.Event) error) error {
	httpapi.StreamEnding(ctx)
	for {
		select {
		case ev := <-w.Events():
			if err := sendEv(ev); err != nil {
				return err
			}
		default:
			return w.Err()
		}
	}
}

// eventToProto is ev on the wire.
func eventToProto(ev watch.Event) *ticketv1.WatchEvent {
	return &ticketv1.WatchEvent{
		Type: ticketv1.WatchEvent_Type(ev.Type), Key: ev.Key, Token: ev.Token,
		Owner: ev.Owner, LeaseMs: ev.LeaseMS, Index: ev.Index,
		Mode: ticketv1.Mode(ev.Mode), Limit: ev.Limit, Session: ev.Session,
	}
}

// waitApplied returns once this node has applied index, or ctx's error.
func (n *Node) waitApplied(ctx context.Context, index uint64) error {
	for n.sm.AppliedIndex() < index {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-n.life.Done():
			return core.ErrStopped
		case <-time.After(appliedPoll):
		}
	}
	return nil
}

// rangeAt returns up to limit locks of this node's table under prefix after
// after (core.StateMachine.Range) and a log index the list reflects: every
// change at or below it is in the list. It re-reads while an apply lands
// between the reads, so the index is exact (no change above it either);
// under a table that never stops changing it gives up after rangeTries and
// returns the lower bound, so a watch from index+1 may repeat a change the
// list already shows, never miss one.
func (n *Node) rangeAt(prefix, after string, limit int) ([]core.Lock, uint64) {
	var locks []core.Lock
	var before uint64
	for range rangeTries {
		before = n.sm.AppliedIndex()
		locks = n.sm.Range(prefix, after, limit)
		if n.sm.AppliedIndex() == before {
			break
		}
	}
	return locks, before
}
