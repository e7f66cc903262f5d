// Package sdk is the Go client of ticketd, a replicated lock service: locks
// with leases that tell you when they may be lost, and fencing tokens that
// let the resource you guard refuse a holder whose lease has passed on.
//
// It is shaped like etcd's clientv3/concurrency and Consul's api.Lock, and
// fixes what users of those complain about:
//
//   - A lost lock is noticed on time. Lease.Done closes at a local deadline
//     measured from the send time of the last acknowledged grant or renewal
//     (not from when the reply arrived), minus a margin for clock-rate drift,
//     so it closes before the server can grant the key to anyone else.
//   - Retries never double-acquire. Every Acquire carries a client-made owner
//     id that its retries reuse; a retry after a lost reply gets the grant the
//     first attempt produced instead of queueing behind it. A failure whose
//     outcome cannot be settled is reported as ErrAmbiguous, never as "not
//     acquired".
//   - Unlocks are never stale. Unlock releases by (key, token): a lock that
//     has been granted to someone else since is left alone.
//
// Beyond exclusive locks (docs/semantics.md#shared-locks-semaphores-and-sessions):
// RLock takes a key shared (the read
// side of a readers-writer lock, Curator InterProcessReadWriteLock; waiters
// are served first in, first out across modes, so a waiting Lock holds back
// later RLocks and writers never starve); Client.Semaphore(key, n) lets up
// to n holders in at once (Curator InterProcessSemaphoreV2). Every holder
// gets a fencing token of its own. A Session (etcd concurrency.Session,
// Consul sessions) is one lease for many locks: one KeepAlive renews them
// all (sent as a message on the session's KeepAliveStream to the leader,
// etcd's LeaseKeepAlive), and when it ends they are all released in one
// committed entry. The
// client opens one default session on first use (WithSessionTTL) for RLock,
// Semaphore.Acquire and Lock with ttl 0, and Close closes it; a ttl > 0
// (or WithLease) gives a lock a lease of its own, renewed one by one.
//
// The client finds the leader (Status, and the LeaderHint detail that
// non-leaders attach to Unavailable errors), talks to it directly, fails over
// between endpoints and retries Unavailable with exponential backoff and
// jitter, within the ctx of each call. It speaks the Connect protocol over
// HTTP/2 by default, gRPC with WithGRPC.
//
// # Usage
//
// The caller's duties:
//
//  1. Create one Client per process with New and the cluster's API
//     endpoints; Close it on exit (it releases the locks held under its
//     default session; leases of their own are left to their TTL).
//  2. Take a lock with Lock (wait in the key's FIFO queue) or TryLock (fail
//     with ErrLocked at once), with a TTL long enough to ride out a leader
//     election (a few seconds); the Lease renews itself every TTL/3.
//  3. Pass Lease.Token with every write to the guarded resource and have the
//     resource refuse tokens lower than the highest it has seen (or call
//     Check): Done can only tell you that the lease may have ended, after the
//     fact; a process paused between checking Done and writing is stopped by
//     the token alone. See examples/fenced-counter.
//  4. Watch Lease.Done and stop the guarded work when it closes; Lease.Err
//     then says why (ErrLeaseLost, ErrReleased).
//  5. Call Lease.Unlock when done. On ErrAmbiguous from Lock or TryLock, the
//     key may be held for up to the TTL by the abandoned request (the client
//     and the server both release such grants when they can).
//
// Errors wrap the sentinels of this package (ErrLocked, ErrNotHeld,
// ErrLeaseLost, ErrAmbiguous, ...) and, when a server answered, its
// *connect.Error; compare with errors.Is and errors.As.
//
// A short loop:
//
//	c, err := sdk.New([]string{"127.0.0.1:7001", "127.0.0.1:7002", "127.0.0.1:7003"})
//	if err != nil { ... }
//	defer c.Close()
//	for job := range jobs {
//		lease, err := c.Lock(ctx, "jobs/"+job.ID, 10*time.Second)
//		if err != nil { ... }
//		err = job.Run(ctx, lease.Token(), lease.Done()) // stops when Done closes
//		_ = lease.Unlock(ctx)
//	}
package sdk
