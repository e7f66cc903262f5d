// Package lessor keeps lease deadlines for the locks of the lock table on
// every node, and expires them on the leader. It follows etcd's lessor
// (server/lease/lessor.go) for the leader-only part: the lessor is "primary"
// only while its node is the promoted leader, and an expiry is a replicated
// core.ExpireSeen{key, token, seen_index} proposal, never a local deletion, so
// clock drift never splits the state (docs/design.md#leases). It goes past
// etcd, where each node tracks a lease's remaining time with its own local
// clock: every node measures every lease from its own apply of the
// lock's last Grant or Renew, so a new leader keeps the deadlines it has —
// no reset at promotion (etcd resets, Chubby and Consul grant a grace
// period; both let a dead holder's lock outlive repeated failovers).
//
// A lease is a lower bound: the service may end a lock later than lease_ms
// after the client sent its request, never earlier. Every node's apply of a
// Grant or Renew happens after the client sent it, so every node's deadline
// is at or after the client's own. An unrenewed lock is removed no later than
// lease_ms + one election and barrier + one expiry round after its last
// acknowledged Grant/Renew, whatever the number of failovers. The Expire
// carries the index of the last Grant/Renew the leader applied for the lock:
// a Renew that commits between the decision and the Expire's apply wins.
//
// Lock-delay (Chubby §2.4, Consul sessions): when an Expire removes a lock
// that asked for one, every node records the delay at its own apply (Delay);
// the leader grants the key again only once Delayed reports 0, and
// Config.OnDelayEnd says when that happens.
//
// A restarted node replays its log: Config.AppliedAt (the data dir's
// apply-time record, server/applytime) tells the lessor when an earlier run
// of the node applied a replayed entry, and a lease is measured from then
// rather than from the replay, so restarts do not stretch it either
// (docs/design.md#leases).
//
// What that record cannot know (an entry applied only after a restart, or
// first received after the client's acknowledgement, or every entry after
// a host reboot) a new leader takes from the other voters: each reports
// the time every lease it times has left (LockReports, SessionReports),
// and the leader lowers its deadlines to the reports of the seen index it
// tracks (Lower), never raising one: the quorum minimum, never early since
// every node measures from an apply after the client's request.
//
// Sessions (docs/design.md#sessions; etcd leases, Consul sessions) are leases of their own,
// timed the same way from every node's apply of their CreateSession or last
// KeepAliveSession and ended on the leader by one core.ExpireSession
// proposal; a holder granted under a session has no deadline of its own and
// is answered for by its session.
//
// # Usage
//
// The server owns one Lessor per node and must, as the caller:
//
//  1. Build it with New(Config{Confirm: a quorum confirmation returning the
//     term, Expire: a function proposing core.ExpireSeen(key, token, seen),
//     ExpireSession: one proposing core.ExpireSession(id, seen)}).
//  2. From the backend's OnApply hook, on every node: call Track for every
//     Grant that returned core.OutcomeGranted (created or an idempotent
//     retry) and every Renew that returned core.OutcomeRenewed, with the
//     entry's index; Removed for every Release that released and every Expire
//     that removed its lock (Existed), then Delay with the result's
//     LockDelayMS; Reconcile from the OnRestore hook (a direct load when
//     the lessor tracks nothing yet, as at start), and Resync on every
//     apply (O(1) unless a snapshot was restored that Reconcile did not see;
//     a gap in the indexes is not a restore). For sessions: TrackUnder
//     for a Grant whose result names a session (instead of Track);
//     TrackSession for every CreateSession and KeepAliveSession applied;
//     SessionEnded, then Removed per holder and Delay per record of
//     Result.Ended, for a session's end.
//  3. From OnLeaderChange, call Promote(stateMachine, term) when IsLeader is
//     true (the barrier has applied) and Demote otherwise.
//  4. On the leader, admit a Renew with Renewable before proposing it, and
//     an idempotent retry's answer with Regrant, a session's KeepAlive with
//     SessionRenewable; serve lock reads on any node with Remaining and
//     Expiring (SessionRemaining, SessionExpiring), grants with Delayed.
//     Mark a ghost lock's Release in flight with MarkGhost (ForgetGhosts on
//     every leadership change; Removed clears one) and a CloseSession in
//     flight with MarkClosing/UnmarkClosing; Ending then tells whether a
//     holder is being removed, for whatever reason, in one call.
//  5. On a voter asked by a new leader, answer with LockReports for pages
//     of the table's holders and SessionReports for pages of its sessions;
//     on that leader, pass each page of answers to Lower with the term it
//     was promoted in (answers of an older term are discarded).
//  6. In Expire and ExpireSession, ask ExpiryDue (SessionExpiryDue) when
//     the lease became due on this leader before proposing, and Late how
//     late that was once the Expire applied: the expiry round's own delay,
//     apart from how the lease was measured (lateness.go).
//  7. Close on shutdown.
//
// Example:
//
//	l, err := lessor.New(lessor.Config{
//		Confirm: node.ConfirmTerm,
//		Expire: func(ctx context.Context, key string, token, seen uint64) error {
//			_, err := node.Propose(ctx, core.ExpireSeen(key, token, seen))
//			return err
//		},
//	})
//	// OnLeaderChange: if ev.IsLeader { l.Promote(sm, ev.Term) } else { l.Demote() }
//	// OnApply: if res.Outcome == core.OutcomeRenewed { l.Track(cmd.Key, cmd.Token, res.LeaseMS, index) }
//	if err := l.Renewable("jobs/nightly", 42); err == nil {
//		_, err = node.Propose(ctx, core.Renew("jobs/nightly", 42))
//	}
package lessor
