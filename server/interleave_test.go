package server

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"pgregory.net/rapid"

	"github.com/ticketd/ticketd/core"
)

// TestInterleavings drives one node through random interleavings of client
// calls (Acquire with and without wait, alone or under a session, Renew,
// Release, CreateSession, KeepAlive, CloseSession, clients going away),
// commits, applies, read confirmations, clock ticks and leadership changes,
// over the same harness as the interaction scripts, and checks after every
// step:
//
//	I1 a token returned to a client is held at the moment it is returned,
//	   and not being removed: neither its Expire nor, under a session, its
//	   session's ExpireSession is decided or in flight (a client's Release of
//	   it, or CloseSession of its session, sent while the Acquire was in
//	   flight, may be in flight or have removed it since);
//	I2 no lock is removed by expiry before its lease measured from the last
//	   acknowledged renewal (or grant);
//	I3 a ghost release only ever releases the token its own grant created;
//	I4 tokens strictly increase cluster-wide, and among the leases
//	   acknowledged to clients on a key none is exclusive beside another and
//	   a semaphore has at most its limit (a holder under a session counts
//	   while its session's acknowledged lease lasts);
//	I5 no Expire is proposed from an epoch that has ended;
//	I6 no key is granted during the lock-delay of its expired lock, or of a
//	   holder its session's end removed (docs/design.md#lock-delay);
//	I7 an Acquire without wait is refused with already_exists only if the
//	   applied table showed the key held by another owner (or under a
//	   lock-delay) at some moment during the call, as recorded when the call
//	   was sent and at every apply (a refusal while the other owner's grant
//	   was only in flight is not linearizable; docs/design.md#waiting-and-fairness);
//	   "held by another owner" means held incompatibly with the request (an
//	   exclusive holder; any holder, for an exclusive request; a full
//	   semaphore);
//	I8 the lock table never holds more than a semaphore's limit, nor an
//	   exclusive holder beside another (checked after every apply);
//	I9 FIFO across modes with writer preference: no shared Acquire is granted
//	   a new holder while an exclusive Acquire with wait on the same key, sent
//	   before it, still waits (unless that request's own grant was rejected
//	   by the table: the defensive path re-queues it at the tail);
//	I10 a holder under a session lives exactly as long as its session: it is
//	   not removed by expiry before the end acknowledged for its session, the
//	   leader proposes the session's ExpireSession once its own deadline for
//	   it has passed, and the session's end leaves none of its holders
//	   (harness_session_test.go states it precisely);
//	I11 an unrenewed lock or session ends (its expiry decided) no later
//	   than max(its acknowledged end, the last promotion) + one bucket of
//	   the apply-time record (harness_bound_test.go).
//
// Key "a" takes exclusive and shared requests, "b" exclusive ones, and "s"
// is a semaphore of limit 2 (now and then asked with limit 3: a limit
// mismatch while it has holders or waiters).
//
// Every client Release of an exclusive lock with waiters is a pipelined
// handoff (docs/design.md#handoff): the head waiter's Grant is proposed right
// behind the Release, or, after
// grant_first, right before it (rejected, the waiter requeued), and the
// interleavings cover the Release failing or its term ending and the waiter
// leaving while that Grant is in flight.
//
// Leadership changes reset no deadline (docs/design.md#leases), so I2 and
// I10 are checked across any number of demotions, promotions and restarts
// (kill -9 and a restart that replays the log), I11 (harness_bound_test.go:
// an acknowledged lease ends within its bound) after every tick, and while
// demoted the node may apply a successor's Renew or KeepAlive
// (replicate_renew, replicate_keepalive), which the next promotion must
// honour.
//
// Watches opened at random points are checked against W1
// (harness_watch_test.go): each sees every change after the start it
// announces exactly once, in order.
//
// A failing case prints its steps; rapid shrinks it to a short one.
func TestInterleavings(t *testing.T) {
	dir := t.TempDir()
	cases, total, restarts := 0, 0, 0
	defer func() { t.Logf("%d interleavings, %d steps, %d restarts", cases, total, restarts) }()
	rapid.Check(t, func(rt *rapid.T) {
		h := newHarness(rt, dir)
		defer h.close()
		h.hold(true, rapid.Bool().Draw(rt, "hold_reads"))
		h.settle()
		var steps []string
		cases++
		defer func() { total += len(steps) }()
		fail := func() {
			h.mu.Lock()
			v := h.check.violations
			h.mu.Unlock()
			if len(v) > 0 {
				rt.Fatalf("%s\nafter steps:\n  %s", strings.Join(v, "\n"), strings.Join(steps, "\n  "))
			}
		}
		keys := rapid.SampledFrom([]string{"a", "b", "s"})
		owners := rapid.SampledFrom([]string{"o1", "o2", "o3"})
		token := rapid.Uint64Range(1, 8)
		count := 0
		name := func(prefix string) string { count++; return fmt.Sprintf("%s%d", prefix, count) }
		// session draws one of the sessions created so far (ended ones
		// too: their KeepAlive or CloseSession is refused).
		session := func(rt *rapid.T) uint64 {
			ids := h.sessionIDs()
			if len(ids) == 0 {
				rt.Skip("no session")
			}
			return rapid.SampledFrom(ids).Draw(rt, "session")
		}
		rt.Repeat(map[string]func(*rapid.T){
			"acquire": func(rt *rapid.T) {
				n, k, o := name("c"), keys.Draw(rt, "key"), owners.Draw(rt, "owner")
				lease := rapid.SampledFrom([]int64{300, 1000}).Draw(rt, "lease")
				wait := rapid.Bool().Draw(rt, "wait")
				delay := rapid.SampledFrom([]int64{0, 0, 400}).Draw(rt, "lock_delay")
				r := acquireRequest{key: k, leaseMS: lease, owner: o, wait: wait, lockDelayMS: delay}
				switch k {
				case "a":
					if rapid.Bool().Draw(rt, "shared") {
						r.mode = core.ModeShared
					}
				case "s":
					r.limit = rapid.SampledFrom([]uint32{2, 2, 2, 3}).Draw(rt, "limit")
				}
				if ids := h.sessionIDs(); len(ids) > 0 && rapid.Bool().Draw(rt, "under_session") {
					r.session = rapid.SampledFrom(ids).Draw(rt, "session")
				}
				steps = append(steps, fmt.Sprintf("acquire name=%s key=%s owner=%s lease=%d wait=%t lock_delay=%d mode=%s limit=%d session=%d",
					n, k, o, lease, wait, delay, r.mode, r.limit, r.session))
				_ = h.acquireReq(n, r)
			},
			"renew": func(rt *rapid.T) {
				n, k, tk := name("r"), keys.Draw(rt, "key"), token.Draw(rt, "token")
				steps = append(steps, fmt.Sprintf("renew name=%s key=%s token=%d", n, k, tk))
				_ = h.renew(n, k, tk)
			},
			"release": func(rt *rapid.T) {
				n, k, tk := name("x"), keys.Draw(rt, "key"), token.Draw(rt, "token")
				steps = append(steps, fmt.Sprintf("release name=%s key=%s token=%d", n, k, tk))
				_ = h.release(n, k, tk)
			},
			"create_session": func(rt *rapid.T) {
				n, ttl := name("s"), rapid.SampledFrom([]int64{300, 1000}).Draw(rt, "ttl")
				steps = append(steps, fmt.Sprintf("create-session name=%s ttl=%d", n, ttl))
				_ = h.createSession(n, ttl)
			},
			"keepalive": func(rt *rapid.T) {
				n, id := name("k"), session(rt)
				steps = append(steps, fmt.Sprintf("keepalive name=%s session=%d", n, id))
				_ = h.keepAlive(n, id)
			},
			"close_session": func(rt *rapid.T) {
				n, id := name("x"), session(rt)
				steps = append(steps, fmt.Sprintf("close-session name=%s session=%d", n, id))
				_ = h.closeSession(n, id)
			},
			"client_gone": func(rt *rapid.T) {
				var pending []string
				for _, n := range h.opOrder {
					if op := h.ops[n]; !op.done && !op.gone {
						pending = append(pending, n)
					}
				}
				if len(pending) == 0 {
					rt.Skip("no client waiting")
				}
				n := rapid.SampledFrom(pending).Draw(rt, "client")
				steps = append(steps, "client-gone name="+n)
				_ = h.clientGone(n)
			},
			"grant_first": func(rt *rapid.T) {
				steps = append(steps, "grant-first")
				h.grantFirstNext()
			},
			// A client opens a Watch (W1: every change after its announced
			// start, once), at any point: during a leadership change, with
			// reads or entries held.
			"watch": func(rt *rapid.T) {
				n, prefix := name("w"), rapid.SampledFrom([]string{"", "a", "s"}).Draw(rt, "prefix")
				existing := rapid.Bool().Draw(rt, "existing")
				steps = append(steps, fmt.Sprintf("watch name=%s prefix=%s existing=%t", n, prefix, existing))
				_ = h.watchOpen(n, prefix, 0, existing)
			},
			"commit": func(rt *rapid.T) { steps = append(steps, "commit n=1"); h.commit(1) },
			"apply":  func(rt *rapid.T) { steps = append(steps, "apply n=1"); h.apply(1) },
			// Everything proposed commits and applies: reaches states with
			// several holders (shared keys, semaphores) in fewer steps.
			"commit_apply": func(rt *rapid.T) {
				steps = append(steps, "commit", "apply")
				h.commit(-1)
				h.apply(-1)
			},
			"confirm": func(rt *rapid.T) {
				steps = append(steps, "confirm")
				h.confirm()
			},
			"tick": func(rt *rapid.T) {
				d := time.Duration(rapid.IntRange(1, 12).Draw(rt, "x50ms")) * 50 * time.Millisecond
				steps = append(steps, "tick "+d.String())
				h.tick(d)
			},
			"demote": func(rt *rapid.T) {
				if !h.n.lessor.Primary() {
					rt.Skip("not leader")
				}
				steps = append(steps, "demote")
				h.demote()
			},
			"replicate_renew": func(rt *rapid.T) {
				if h.n.lessor.Primary() {
					rt.Skip("leader")
				}
				k, tk := keys.Draw(rt, "key"), token.Draw(rt, "token")
				steps = append(steps, fmt.Sprintf("replicate renew key=%s token=%d", k, tk))
				if err := h.replicate(core.Renew(k, tk)); err != nil {
					rt.Fatalf("replicate: %v", err)
				}
			},
			"replicate_keepalive": func(rt *rapid.T) {
				if h.n.lessor.Primary() {
					rt.Skip("leader")
				}
				id := session(rt)
				steps = append(steps, fmt.Sprintf("replicate keepalive session=%d", id))
				if err := h.replicate(core.KeepAliveSession(id)); err != nil {
					rt.Fatalf("replicate: %v", err)
				}
			},
			// kill -9 and restart (harness_restart_test.go): the node
			// replays what it applied and follows until a promote; its
			// uncommitted entries are lost (another leader's log
			// overwrote them) and no client in flight hears an answer.
			// Not with committed entries waiting to apply (a restart
			// would lose them, which Raft never does) nor with watches
			// open.
			"restart": func(rt *rapid.T) {
				if h.committedWaiting() || len(h.watches) > 0 {
					rt.Skip("committed entries waiting, or watches open")
				}
				steps = append(steps, "restart")
				restarts++
				if err := h.restart(); err != nil {
					rt.Fatalf("restart: %v", err)
				}
			},
			"promote": func(rt *rapid.T) {
				if h.n.lessor.Primary() {
					rt.Skip("leader already")
				}
				steps = append(steps, "promote")
				h.promote()
			},
			"": func(rt *rapid.T) { fail() },
		})
		fail()
	})
}
