// Package watch is a node's watch hub: a bounded, in-memory history of the
// lock-table changes this node applied, and their fan-out to watchers (the
// LockService.Watch streams), each with its own bounded buffer.
//
// Every node feeds its own hub from its own apply hook, in log order, so a
// watcher on any node sees the same events with the same indexes: the index
// of an event is the Raft log index of the entry that applied it (the role of
// an etcd revision). Most entries change at most one holder; a session's end
// (docs/design.md#sessions) makes one event per holder it removed, all with its index, in
// key and token order on every node. The hub handles entries whole: a
// watcher gets all of an entry's events under its prefix or none of them,
// and the history keeps or drops an entry with all its events, so a watcher
// the hub ends resumes exactly at "last index received + 1".
//
// Events (see EventOf):
//   - GRANTED: a Grant that created its lock (core.Result.Created). An
//     idempotent retry that returned its owner's lock restarts the lease and
//     is reported as RENEWED, never as a second GRANTED.
//   - RENEWED: a replicated Renew (core.OutcomeRenewed), or a retry Grant.
//   - RELEASED: a Release that removed the lock.
//   - EXPIRED: an Expire that removed the lock (core.Result.Existed).
//
// Apply never blocks on a watcher: a watcher whose buffer has no room for
// an entry's events is ended with ErrSlow before the first of them and may
// resume from the index after the last event it got, as
// etcd ends a slow watcher's stream (its "unsynced" catch-up is done here from
// the retained history instead). The history is bounded by entries and by
// bytes; a watcher asking to start below the oldest retained index gets a
// *CompactedError naming it (etcd's ErrCompacted), and re-lists.
//
// # Usage
//
//  1. Build the hub with New(cfg) before the consensus backend starts, so
//     it sees every entry the backend applies (replay included).
//  2. Call Apply from the backend's OnApply hook for every applied entry, in
//     log order, from one goroutine. It never blocks.
//  3. For each watch request, call Watch; then read Backlog() and the
//     Events() channel until Done() is closed; Err() says why it ended. Call
//     Close when the client goes.
//  4. On shutdown call Hub.Close: every watcher ends with ErrClosed.
//
// Example:
//
//	w, err := hub.Watch(watch.Request{Prefix: "jobs/", StartIndex: from})
//	if err != nil {
//		return err // *CompactedError, ErrTooManyWatchers, ErrClosed
//	}
//	defer w.Close()
//	for _, ev := range w.Backlog() {
//		send(ev)
//	}
//	for {
//		select {
//		case ev := <-w.Events():
//			send(ev)
//		case <-w.Done():
//			return w.Err() // ErrSlow, ErrClosed
//		}
//	}
package watch
