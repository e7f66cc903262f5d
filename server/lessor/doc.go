// Package lessor keeps lease deadlines for the locks of the lock table and
// expires them, on the leader only. It follows etcd's lessor
// (server/lease/lessor.go): the lessor is "primary" only while its node is the
// promoted leader; deadlines are local monotonic-clock instants, never
// replicated state; an expiry is a replicated core.Expire{key, token}
// proposal, so clock drift never splits the state (DESIGN.md, Leases).
//
// A lease is a lower bound: the service may end a lock later than lease_ms
// after the client sent its request, never earlier. Hence deadlines are
// measured from the local apply of the grant (after the client sent it), a
// renewal is measured from after its quorum confirmation, and Promote gives
// every lock a full fresh lease (Chubby's grace period after failover).
//
// # Usage
//
// The server owns one Lessor per node and must, as the caller:
//
//  1. Build it with New(Config{Confirm: consensus.ReadIndex, Expire: a
//     function proposing core.Expire(key, token)}).
//  2. From the backend's OnApply hook, call Granted for every applied grant
//     (core.OutcomeGranted) and Removed for every applied Release or Expire.
//  3. From OnLeaderChange, call Promote(stateMachine) when IsLeader is true
//     (the barrier has applied) and Demote otherwise.
//  4. Serve keep-alives with Renew, lock reads with Remaining and Expiring.
//  5. Close on shutdown.
//
// Example:
//
//	l, err := lessor.New(lessor.Config{
//		Confirm: node.ReadIndex,
//		Expire: func(ctx context.Context, key string, token uint64) error {
//			_, err := node.Propose(ctx, core.Expire(key, token))
//			return err
//		},
//	})
//	// OnLeaderChange: if ev.IsLeader { l.Promote(sm) } else { l.Demote() }
//	// OnApply: if res.Outcome == core.OutcomeGranted { l.Granted(cmd.Key, res.Token, res.LeaseMS) }
//	leaseMS, err := l.Renew(ctx, "jobs/nightly", 42)
package lessor
