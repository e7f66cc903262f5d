// Package check decides whether a history of calls to a ticketd cluster
// (package history) is one a correct lock service could have produced. It
// checks five properties (docs/faults.md):
//
//   - linearizability of the lock table, with porcupine and the model below;
//   - fencing (Fencing): a token is never granted twice, and tokens strictly
//     increase in real-time order (Chubby §2.4 sequencers);
//   - lease safety (LeaseSafety): no key is granted to another holder while an
//     earlier lock of it must still be held (where either is exclusive), and
//     no semaphore to more holders than its limit;
//   - durability (Durability): acknowledged grants and releases survive
//     restarts, and the token counter never goes back;
//   - liveness (Liveness): a dead holder's key is free again within lease_ms
//     plus a failover bound once the faults are healed.
//
// # The model
//
// The state machine of docs/design.md#replicated-commands, seen from clients, per key (the model is
// partitioned by key; tokens are global, and Fencing checks them across keys):
// a key is free or held by (owner, token, lease). Operations:
//
//   - Acquire(owner, lease) OK(token): the key was free and is now held by
//     owner with token (greater than every earlier token of the key), or it
//     was already held by owner (a retry) and token is that lock's.
//     AlreadyExists: the key is held by another owner (or by a ghost lock of
//     this owner, below). Any other refusal says nothing and is left out.
//   - Release(token) OK: the key was held with token and is now free.
//     NotFound: it was not held with token.
//   - Renew(token) OK: the key is held with token. NotFound: it is not, or
//     the lock's lease has run out (its Expire may not be applied yet).
//   - Get OK: the holder's owner and token, or free.
//   - CheckToken(token) OK(valid, current): valid iff held with token;
//     invalid with current = 0 when free; invalid with current = token is
//     allowed only once the lease has run out or for a ghost lock (the
//     server refuses a lock it is about to remove).
//
// Time. Expiry is server-initiated, so the model lets a lock end on its own,
// between any two operations, but only after its lease could have ended:
// every lock carries NotBefore, the largest Call + lease_ms of its
// acknowledged Acquires and Renews, measured on the client's monotonic
// clock. A lease is a lower bound measured from when the client sent its
// request (docs/design.md#leases), and the server's deadline starts when the
// grant applies, which is after that; so a correct server never removes a
// lock before NotBefore. When the model lets a lock expire right before an
// operation, that operation's linearisation point must be at or after
// NotBefore, so it must have returned at or after NotBefore; the state keeps
// that bound (Floor) so that every later operation must have returned after
// it too. Real-time order between operations is porcupine's own.
//
// Unknown outcomes. A call that timed out or failed in a way that does not
// prove it was refused may have taken effect, at any time after its Call —
// even after the client gave up (a proposal can commit late). Unknown reads
// and Renews are dropped (a renewal only makes a lock live longer, and
// living longer is always allowed). Unknown Acquires and Releases are not
// porcupine operations but events the model may fire at any time after
// their Call: a free key may become held by a ghost lock (owner: one of the
// key's Unknown Acquires, called no later than the operation that observes
// it; token unknown until observed); a lock whose token has an Unknown
// Release may end from that Release's Call on. A ghost lock may also end at
// any time: the server releases a grant whose client has gone
// (docs/design.md#ghost-locks), and its lease was never acknowledged to
// anyone. Modelled
// this way, porcupine never has to try every position of a call with no
// response, and an illegal history is refuted in milliseconds instead of
// exponential time.
//
// Everything the model allows beyond a precise server (an unobserved ghost
// token, an Unknown Acquire's ghost firing more than once) makes it more
// permissive, never stricter: a violation it reports is a real one.
//
// # Shared locks, semaphores and sessions
//
// A key that any operation of the history uses with a mode, a limit or a
// session is checked against the holders model (holdersState); every other
// key against the exclusive model above, exactly as before. A key holds a
// set of holders, each (owner, token, mode, limit, session, lease):
//
//   - Acquire OK: a retry (the owner holds the key) returns that holder's
//     token; otherwise the request must be admitted beside the holders — a
//     shared one if none is exclusive, an exclusive one if there is none,
//     a semaphore's if fewer than limit hold it, and only with the limit
//     the holders have — with a token above every earlier grant of the key.
//     AlreadyExists: the request is not admitted at its linearisation point
//     (with the same limit). FailedPrecondition (LimitMismatch): the holders
//     have another limit — or the key is free: the leader also compares
//     with its waiters, which no client sees, so a free key allows it
//     (leaving such refusals out would drop the check that a key whose
//     holders have the request's limit never refuses it).
//   - Release, Renew and CheckToken act on one (key, token); CheckToken is
//     valid iff the token is a holder (invalid for one whose lease ran out
//     or a ghost), and current_token is the newest holder's token.
//   - Get lists every holder; the list must be exactly the model's.
//   - A holder under a session is timed by its session: it may expire only
//     after the largest Call + ttl of the session's acknowledged
//     CreateSession and KeepAlives; it may end from the Call of any
//     CloseSession of it on, and has ended before any operation called
//     after an acknowledged CloseSession returned. The session calls carry
//     no key and are not operations of the porcupine history.
//
// Unknown Acquires are not fired ahead: a grant of one is added as a ghost
// holder when an operation sees it (a Get lists it, its owner's retry
// returns it), its token not bound below by later grants; a refusal or a
// current_token that only such an unseen grant could explain is allowed.
// Holders may end on their own as above, and the model ends them only when
// an operation calls for it (a Get that does not list them, a grant they
// would block, an older current_token), right before it: ending a holder
// later than it could have ended never rules out more than ending it
// earlier, and porcupine's sets of states stay small (ending every subset
// of a dozen expired shared holders before each operation did not finish
// in five minutes on a 20 s run's history; this takes milliseconds).
// Unknown Acquires and the lazy ends make the model more permissive than
// the server, never stricter.
//
// The checkers hold beside the model: LeaseSafety reports an exclusive
// holder certainly alive beside another holder (PropLease) and more
// certainly-alive holders of a semaphore than its limit (PropLimit);
// Fencing's checks (no token granted twice, tokens increase in real-time
// order) cover every holder, so tokens strictly increase in grant order on
// every key.
//
// # Usage
//
//  1. Record a history with package history (unique owner per acquisition;
//     retries of an Acquire reuse its owner).
//  2. Tag the reads made after the last restart of every node TagFinal and
//     the polls made after the workload stopped TagLiveness.
//  3. r := Run(Input{Ops: ops, FinalLastToken: lt, Liveness: &w, Timeout: 5*time.Minute}).
//  4. If r.Err() != nil, r.Write(dir, ops, notes) leaves the history,
//     the violations and porcupine's visualisation in dir.
//
// Example:
//
//	r := check.Run(check.Input{Ops: rec.History(), Timeout: time.Minute})
//	if err := r.Err(); err != nil {
//		_ = r.Write(dir, ops, nil)
//		t.Fatal(err)
//	}
package check
