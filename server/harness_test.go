package server

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/internal/fakeclock"
	"github.com/ticketd/ticketd/server/internal/memraft"
	"github.com/ticketd/ticketd/server/watch"
)

// harness drives one Node step by step over memraft's step-by-step mode and a
// fake clock, for the interaction scripts (interaction_test.go) and the
// interleaving property test (interleave_test.go). Client calls run in their
// own goroutines, as RPCs do; after every step the harness waits until every
// goroutine is blocked (settle), so each step's outcome is deterministic: the
// only things that move the system are the steps themselves (propose, commit,
// apply, confirm, tick, leadership).
//
// It calls the leader-local serving paths (acquire, Renew, release) directly,
// below routing and forwarding, and maps errors through errmap like a handler.
type harness struct {
	t     harnessT
	n     *Node
	mem   *memraft.Node
	clock *fakeclock.Clock
	start time.Time

	mu       sync.Mutex // guards events and the checker (hooks run on node goroutines)
	events   []string   // observed since the last print
	check    checker
	ops      map[string]*clientOp
	opOrder  []string
	released map[lockID]int // client Release calls in flight per lock

	grantFirst bool // the next Submit lets a handed-off Grant go first (orderedMem)
	gate       grantGate

	observe atomic.Bool // record applies (set once the node leads)

	dir      string    // the parent of the node's data dir, kept across restarts
	officeAt time.Time // when the node last became leader (I11)
	// holdProposals and holdReads are memraft's step-by-step mode (hold),
	// set again on the node a restart starts; restarted says one did.
	holdProposals, holdReads bool
	restarted                bool

	watches []*harnessWatch // Watch streams opened (harness_watch_test.go)
	changes []watch.Event   // every change applied since observe, in log order
}

// harnessT is what the harness needs of *testing.T and *rapid.T.
type harnessT interface {
	Helper()
	Fatal(args ...any)
	Fatalf(format string, args ...any)
	Cleanup(fn func())
}

// lockID names one lock: a key and the token of one grant.
type lockID struct {
	key   string
	token uint64
}

// clientOp is one client call in flight or answered.
type clientOp struct {
	name, kind string
	id         lockID
	owner      string
	leaseMS    int64
	wait       bool // an Acquire that may wait
	// mode and limit are an Acquire's (docs/semantics.md: shared locks,
	// semaphores).
	mode  core.Mode
	limit uint32
	// session is the session an Acquire asks to hold its lock under, or the
	// one a KeepAlive or CloseSession names (0: none;
	// harness_session_test.go).
	session uint64
	// lostPlace: a grant of this Acquire's owner on its key was rejected
	// by the table (the defensive path: it enters the queue again at the
	// tail), so it no longer holds its FIFO place (I9).
	lostPlace bool
	// sawHeld: the applied table showed the key held by another owner (or
	// under a lock-delay) at some moment since the call was sent (I7).
	sawHeld bool
	sent    time.Time
	cancel  context.CancelFunc
	out     chan opResult
	done    bool
	gone    bool
	res     opResult
}

type opResult struct {
	res  core.Result
	read string // a get's answer
	err  error
}

// newHarness starts a node over memraft with a fake clock, waits until it
// leads with its member address recorded, and returns it settled. Proposals
// apply at once until hold.
// dir is the parent of the node's data dir, which holds its apply-time
// record across restarts (harness_restart_test.go).
func newHarness(t harnessT, dir string) *harness {
	t.Helper()
	h := &harness{t: t, clock: fakeclock.New(), ops: map[string]*clientOp{}, released: map[lockID]int{}, dir: dir}
	h.start = h.clock.Now()
	h.officeAt = h.start
	h.check.init()
	n, err := h.newNode(false, func(bc backends.Config) (*memraft.Node, error) { return memraft.NewDurable(bc) })
	if err != nil {
		t.Fatalf("harness: new node: %v", err)
	}
	h.n = n
	t.Cleanup(h.close)
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, recorded := n.sm.MemberAPIAddr("n1")
		if n.stillLeader(h.mem.Status().Term) && recorded {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("harness: node did not lead")
		}
		time.Sleep(time.Millisecond)
	}
	h.settle()
	h.mem.SetProposeHook(h.onPropose)
	h.observe.Store(true)
	return h
}

// orderedMem is memraft with its core.Submitter (releasehandoff.go) steered, so that
// a pipelined handoff's Grant is always proposed after its Release and the
// scripts' log order is deterministic. With grantFirst set, the next
// Submit instead lets the handed-off Grant go first (the order of a Release
// dropped after its Submit returned and retried behind the Grant, which
// core.Submitter allows): its Release is proposed once the Grant is in the
// log or the handoff's turn has ended.
type orderedMem struct {
	*memraft.Node
	h *harness
}

// Submit proposes cmd in its own goroutine and returns once cmd is in the
// held log (or its Propose returned: applied at once, or failed).
func (m orderedMem) Submit(ctx context.Context, cmd core.Command) (func(context.Context) (core.Result, error), error) {
	before := len(m.Log())
	out := make(chan opResult, 1)
	propose := func() {
		res, err := m.Propose(ctx, cmd)
		out <- opResult{res: res, err: err}
	}
	m.h.mu.Lock()
	grantFirst := m.h.grantFirst
	m.h.grantFirst = false
	m.h.mu.Unlock()
	if grantFirst {
		inflight := m.h.n.queue.Inflight()
		return func(context.Context) (core.Result, error) {
			// Handoff ran between Submit and this call.
			for len(m.Log()) <= before && m.h.n.queue.Inflight() > inflight {
				m.h.gate.passKey(cmd.Key)
				runtime.Gosched()
			}
			propose()
			r := <-out
			return r.res, r.err
		}, nil
	}
	go propose()
	for len(m.Log()) <= before {
		select {
		case r := <-out:
			return func(context.Context) (core.Result, error) { return r.res, r.err }, nil
		default:
			runtime.Gosched()
		}
	}
	return func(context.Context) (core.Result, error) {
		r := <-out
		return r.res, r.err
	}, nil
}

func (h *harness) close() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, op := range h.ops {
		op.cancel()
	}
	h.watchClose()
	_ = h.n.Close(ctx)
}

// now is the fake time since the harness started.
func (h *harness) now() time.Duration { return h.clock.Now().Sub(h.start) }

// event records one observation for the next print.
func (h *harness) event(format string, args ...any) {
	h.events = append(h.events, fmt.Sprintf(format, args...))
}

// onPropose is memraft's propose hook: it sees every command as it is
// proposed (I3, I5 are checked here).
func (h *harness) onPropose(cmd core.Command) {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch cmd.Op {
	case core.OpExpire:
		id := lockID{cmd.Key, cmd.Token}
		if !h.n.lessor.Expiring(id.key, id.token) {
			h.check.violate("I5", "Expire %s/%d proposed though the current epoch has not ended its lease", id.key, id.token)
		}
	case core.OpRelease:
		id := lockID{cmd.Key, cmd.Token}
		if h.released[id] == 0 && h.check.delivered[id] {
			h.check.violate("I3", "ghost Release %s/%d of a token handed to a client", id.key, id.token)
		}
	case core.OpExpireSession:
		if !h.n.lessor.SessionExpiring(cmd.Session) {
			h.check.violate("I5", "ExpireSession %d proposed though the current epoch has not ended its lease", cmd.Session)
		}
	}
	h.event("propose %s", cmdString(cmd))
}

// onApply is memraft's apply hook (I2, I4 are checked here).
func (h *harness) onApply(index uint64, cmd core.Command, res core.Result) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if cmd.Op == core.OpNoop || cmd.Op == core.OpSetMember {
		return
	}
	if cmd.Op == core.OpRelease && res.Outcome == core.OutcomeReleased && h.released[lockID{cmd.Key, cmd.Token}] > 0 {
		h.check.clientRemoved[lockID{cmd.Key, cmd.Token}] = true
	}
	h.check.sessionApplied(h.clock.Now(), index, cmd, res, h.n.sm) // before applied forgets the holders it removed
	h.check.applied(h.clock.Now(), cmd, res)
	h.check.bound.applied(h.clock.Now(), cmd, res)
	h.recordChanges(index, cmd, res)
	if res.Ended != nil {
		h.sessionEndApplied(res.Ended)
	}
	if cmd.Op == core.OpGrant || cmd.Op == core.OpRelease || cmd.Op == core.OpExpire {
		h.check.table(cmd.Key, h.n.sm.Holders(cmd.Key))
	}
	if cmd.Op == core.OpGrant && res.Outcome == core.OutcomeGrantRejected {
		h.lostPlace(cmd)
	}
	delayed := cmd.Op == core.OpExpire && res.Existed && res.LockDelayMS > 0 // the lessor learns it after this hook
	h.observeHeld(cmd.Key, delayed)
	h.event("apply %d %s -> %s", index, cmdString(cmd), resString(res))
}

// heldFor reports whether the applied table shows op's key held
// incompatibly with op by another owner (an exclusive holder; any holder,
// for an exclusive request; a full semaphore), or under a lock-delay: what
// lets an Acquire without wait be refused (docs/semantics.md). Called from
// the apply hook (the table is the one just applied) and when a call is sent.
// It reads the table on its own, as the oracle of the queue's refusals.
func (h *harness) heldFor(op *clientOp) bool {
	holders := h.n.sm.Holders(op.id.key)
	if len(holders) == 0 {
		return h.n.lessor.Delayed(op.id.key) > 0
	}
	for _, lk := range holders {
		if holderID(lk.Owner, lk.Principal) == op.owner {
			return false
		}
	}
	if op.limit > 0 {
		return len(holders) >= int(op.limit)
	}
	return op.mode != core.ModeShared || holders[0].Mode != core.ModeShared || holders[0].Limit > 0
}

// lostPlace marks the Acquire calls in flight whose grant cmd was rejected
// by the table (I9). h.mu held.
func (h *harness) lostPlace(cmd core.Command) {
	for _, name := range h.opOrder {
		if op := h.ops[name]; !op.done && op.kind == "acquire" && op.id.key == cmd.Key && op.owner == cmd.Owner {
			op.lostPlace = true
		}
	}
}

// observeHeld records, for every Acquire without wait in flight on key, that
// the applied table shows key held by another owner now (I7); delayed says a
// lock-delay of key has just started. h.mu held.
func (h *harness) observeHeld(key string, delayed bool) {
	for _, name := range h.opOrder {
		op := h.ops[name]
		if op.done || op.kind != "acquire" || op.wait || op.id.key != key || op.sawHeld {
			continue
		}
		op.sawHeld = delayed || h.heldFor(op)
	}
}

// settle waits until every goroutine but the caller's is blocked: nothing
// moves until the next step. It fails the test after 10s (a livelock).
func (h *harness) settle() {
	h.t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	buf := make([]byte, 1<<20)
	// Quiet three times in a row, the last two a little apart in real time:
	// a goroutine just woken by the runtime (a channel send from another
	// thread, a lock handed over) may not show as runnable in the same
	// instant on a loaded machine.
	for quiet := 0; quiet < 3; {
		runtime.Gosched()
		if quiet > 0 {
			time.Sleep(100 * time.Microsecond)
		}
		n := runtime.Stack(buf, true)
		if busy(buf[:n]) {
			quiet = 0
		} else {
			quiet++
		}
		if time.Now().After(deadline) {
			h.t.Fatalf("harness: goroutines did not settle:\n%s", buf[:n])
		}
		if quiet == 3 && h.gate.passFirst(h.sendOrder) {
			quiet = 0 // a Grant let through: settle again
		}
	}
	h.collect()
	h.watchSettled()
	h.mu.Lock()
	h.checkSessionDeadlines()
	h.mu.Unlock()
}

// busy reports whether a goroutine other than the first (the caller) in a
// runtime.Stack dump is running, runnable, or held up by the garbage
// collector.
func busy(dump []byte) bool {
	for i, g := range bytes.Split(dump, []byte("\n\n")) {
		if i == 0 {
			continue
		}
		open := bytes.IndexByte(g, '[')
		end := bytes.IndexByte(g, ']')
		if open < 0 || end < open {
			continue
		}
		state := string(g[open+1 : end])
		// A goroutine held up by the garbage collector (an allocation's GC
		// assist, a stop of the world) is about to run on: it is not
		// waiting for the next step.
		if strings.HasPrefix(state, "running") || strings.HasPrefix(state, "runnable") || strings.HasPrefix(state, "syscall") ||
			strings.HasPrefix(state, "preempted") || strings.HasPrefix(state, "copystack") ||
			strings.HasPrefix(state, "GC assist") || strings.HasPrefix(state, "garbage collection") ||
			strings.HasPrefix(state, "stopping the world") {
			return true
		}
	}
	return false
}

// collect records the answers of client calls that returned (I1 is checked
// here: a returned token is held when the client gets it).
func (h *harness) collect() {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range h.opOrder {
		op := h.ops[name]
		if op.done {
			continue
		}
		select {
		case r := <-op.out:
			op.done, op.res = true, r
		default:
			continue
		}
		if op.kind == "release" {
			h.released[op.id]--
		}
		if op.gone {
			continue // nobody hears it
		}
		h.event("%s -> %s", op.name, replyString(op, op.res))
		h.check.answered(h, op)
	}
}

// startOp runs call as client name in its own goroutine.
func (h *harness) startOp(op *clientOp, call func(ctx context.Context) (core.Result, error)) error {
	return h.run(op, func(ctx context.Context) opResult {
		res, err := call(ctx)
		return opResult{res: res, err: err}
	})
}

// startOpRead runs read as client name in its own goroutine.
func (h *harness) startOpRead(op *clientOp, read func(ctx context.Context) (*string, error)) error {
	return h.run(op, func(ctx context.Context) opResult {
		s, err := read(ctx)
		if err != nil {
			return opResult{err: err}
		}
		return opResult{read: *s}
	})
}

// run runs call as client op.name in its own goroutine and settles.
func (h *harness) run(op *clientOp, call func(ctx context.Context) opResult) error {
	if _, dup := h.ops[op.name]; dup {
		return fmt.Errorf("client %q exists", op.name)
	}
	ctx, cancel := context.WithCancel(context.Background())
	op.cancel, op.out, op.sent = cancel, make(chan opResult, 1), h.clock.Now()
	h.mu.Lock()
	if op.kind == "acquire" && !op.wait {
		op.sawHeld = h.heldFor(op)
	}
	h.ops[op.name] = op
	h.opOrder = append(h.opOrder, op.name)
	if op.kind == "release" {
		h.released[op.id]++
	}
	h.mu.Unlock()
	go func() { op.out <- call(ctx) }()
	h.settle()
	return nil
}

// get starts a linearizable GetLock(key) as client name: a ReadIndex, then
// this node's table, as the handler does (afterReadIndex).
func (h *harness) get(name, key string) error {
	op := &clientOp{name: name, kind: "get", id: lockID{key: key}}
	read := afterReadIndex(h.n, func() (*string, error) {
		s := "free"
		if lk, ok := h.n.sm.Get(key); ok {
			s = fmt.Sprintf("held token=%d owner=%s", lk.Token, lk.Owner)
		}
		return &s, nil
	})
	if err := h.startOpRead(op, read); err != nil {
		return err
	}
	return nil
}

// acquire starts Acquire(key, leaseMS, owner, wait) as client name.
func (h *harness) acquire(name, key, owner string, leaseMS int64, wait bool) error {
	return h.acquireDelay(name, key, owner, leaseMS, wait, 0)
}

// acquireDelay starts Acquire(key, leaseMS, owner, wait, lock_delay_ms) as client name.
func (h *harness) acquireDelay(name, key, owner string, leaseMS int64, wait bool, lockDelayMS int64) error {
	return h.acquireReq(name, acquireRequest{key: key, leaseMS: leaseMS, owner: owner, wait: wait, lockDelayMS: lockDelayMS})
}

// acquireReq starts Acquire r as client name (any mode and limit).
func (h *harness) acquireReq(name string, r acquireRequest) error {
	op := &clientOp{name: name, kind: "acquire", id: lockID{key: r.key}, owner: r.owner, leaseMS: r.leaseMS, wait: r.wait,
		mode: r.mode, limit: r.limit, session: r.session}
	return h.startOp(op, func(ctx context.Context) (core.Result, error) {
		return h.n.acquire(ctx, r)
	})
}

// replicate applies cmd on this node as a follower, as if another leader
// had committed it (call it only while demoted): a successor's Grant, Renew,
// Release or KeepAliveSession. A Renew or KeepAliveSession that applies is
// acknowledged to its client now.
func (h *harness) replicate(cmd core.Command) error {
	res, err := h.mem.Replicate(cmd)
	if err != nil {
		return err
	}
	h.settle()
	h.mu.Lock()
	defer h.mu.Unlock()
	if cmd.Op == core.OpKeepAliveSession {
		if res.Outcome == core.OutcomeRenewed {
			h.check.sess.ack(cmd.Session, h.clock.Now().Add(ms(res.LeaseMS)))
		}
		return nil
	}
	if res.Outcome == core.OutcomeRenewed || (res.Outcome == core.OutcomeGranted && cmd.Op == core.OpGrant) {
		token := cmd.Token
		if cmd.Op == core.OpGrant {
			token = res.Token
		}
		id := lockID{cmd.Key, token}
		h.learnKind(id)
		h.check.ack(id, h.clock.Now().Add(ms(res.LeaseMS)))
	}
	return nil
}

// renew starts Renew(key, token) as client name.
func (h *harness) renew(name, key string, token uint64) error {
	op := &clientOp{name: name, kind: "renew", id: lockID{key, token}}
	return h.startOp(op, func(ctx context.Context) (core.Result, error) {
		leaseMS, err := h.n.renew(ctx, key, token)
		return core.Result{Token: token, LeaseMS: leaseMS}, err
	})
}

// release starts Release(key, token) as client name.
func (h *harness) release(name, key string, token uint64) error {
	op := &clientOp{name: name, kind: "release", id: lockID{key, token}}
	return h.startOp(op, func(ctx context.Context) (core.Result, error) {
		return core.Result{Outcome: core.OutcomeReleased}, h.n.release(ctx, key, token)
	})
}

// grantFirstNext makes the next client Release with a handoff let the
// waiter's Grant into the log before the Release (see orderedMem).
func (h *harness) grantFirstNext() {
	h.mu.Lock()
	h.grantFirst = true
	h.mu.Unlock()
}

// clientGone cancels client name's call: it hears no answer.
func (h *harness) clientGone(name string) error {
	op, ok := h.ops[name]
	if !ok {
		return fmt.Errorf("no client %q", name)
	}
	h.mu.Lock()
	op.gone = true
	h.mu.Unlock()
	op.cancel()
	h.settle()
	return nil
}

// tick moves the fake clock by d; the lessor's timers fire.
func (h *harness) tick(d time.Duration) {
	h.clock.Advance(d)
	h.settle()
	h.mu.Lock()
	h.check.tick(h.clock.Now())
	h.checkBound()
	h.mu.Unlock()
}

// expiryRound moves the fake clock to the earliest lease deadline the lessor
// tracks, a lock's or a session's (if any is ahead), and lets the expiry
// round run.
func (h *harness) expiryRound() {
	var next time.Duration = -1
	h.n.sm.Ascend(func(lk core.Lock) bool {
		if d, ok := h.n.lessor.Remaining(lk.Key, lk.Token); ok && (next < 0 || d < next) {
			next = d
		}
		return true
	})
	h.n.sm.AscendSessions(func(s core.Session) bool {
		if d, ok := h.n.lessor.SessionRemaining(s.ID); ok && (next < 0 || d < next) {
			next = d
		}
		return true
	})
	if next < 0 {
		next = 0
	}
	h.tick(next)
}

// demote makes the node a follower with no leader known.
func (h *harness) demote() {
	h.mem.Demote(core.Member{})
	h.settle()
	h.event("demoted: term %d", h.mem.Status().Term)
}

// promote makes the node leader of a new term (its barrier applies first).
func (h *harness) promote() {
	h.mem.Promote()
	h.settle()
	h.mu.Lock()
	h.officeAt = h.clock.Now()
	h.mu.Unlock()
	h.event("promoted: term %d", h.mem.Status().Term)
}

// commit commits count entries (all when < 0); apply applies count
// committed entries; confirm answers held reads.
func (h *harness) commit(count int) { h.mem.Commit(count); h.settle() }
func (h *harness) apply(count int)  { h.mem.Apply(count); h.settle() }
func (h *harness) confirm()         { h.mem.Confirm(); h.settle() }

// flush returns the events since the last call and forgets them.
func (h *harness) flush() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	ev := h.events
	h.events = nil
	return ev
}

// leaderString describes leadership: the backend's view and the node's.
func (h *harness) leaderString() string {
	st := h.mem.Status()
	role := "follower"
	if h.n.stillLeader(st.Term) {
		role = "leader"
	}
	return fmt.Sprintf("%s term=%d lessor_primary=%t", role, st.Term, h.n.lessor.Primary())
}

// locksString lists the lock table with the lessor's view of each lease,
// the lock-delays and the open sessions.
func (h *harness) locksString() string {
	var b strings.Builder
	h.n.sm.Ascend(func(lk core.Lock) bool {
		fmt.Fprintf(&b, "lock %s token=%d owner=%s", lk.Key, lk.Token, lk.Owner)
		if lk.Mode == core.ModeShared {
			b.WriteString(" shared")
		}
		if lk.Limit > 0 {
			fmt.Fprintf(&b, " limit=%d", lk.Limit)
		}
		if lk.Session != 0 {
			fmt.Fprintf(&b, " session=%d", lk.Session)
		}
		if d, ok := h.n.lessor.Remaining(lk.Key, lk.Token); ok {
			fmt.Fprintf(&b, " remaining=%s", d)
		}
		if h.n.lessor.Expiring(lk.Key, lk.Token) {
			b.WriteString(" expiring")
		}
		if h.n.lessor.Ghost(lk.Key, lk.Token) {
			b.WriteString(" ghost")
		}
		b.WriteString("\n")
		return true
	})
	h.n.sm.AscendLockDelays(func(d core.LockDelay) bool {
		if left := h.n.lessor.Delayed(d.Key); left > 0 {
			fmt.Fprintf(&b, "delay %s remaining=%s\n", d.Key, left)
		}
		return true
	})
	b.WriteString(h.sessionsString())
	if b.Len() == 0 {
		return "no locks\n"
	}
	return b.String()
}

// stateString is what every step prints after its events: the log not yet
// applied, held reads, the lock table and the clients still waiting.
func (h *harness) stateString() string {
	var b strings.Builder
	for _, e := range h.mem.Log() {
		st := "proposed"
		if e.Committed {
			st = "committed"
		}
		fmt.Fprintf(&b, "log %s term=%d %s\n", cmdString(e.Cmd), e.Term, st)
	}
	if r := h.mem.HeldReads(); r > 0 {
		fmt.Fprintf(&b, "reads held=%d\n", r)
	}
	b.WriteString(h.locksString())
	h.mu.Lock()
	var waiting []string
	for _, name := range h.opOrder {
		if op := h.ops[name]; !op.done && !op.gone {
			waiting = append(waiting, name)
		}
	}
	h.mu.Unlock()
	if len(waiting) > 0 {
		fmt.Fprintf(&b, "waiting %s\n", strings.Join(waiting, " "))
	}
	return b.String()
}

func cmdString(c core.Command) string {
	switch c.Op {
	case core.OpGrant:
		out := fmt.Sprintf("grant %s owner=%s lease=%dms", c.Key, c.Owner, c.LeaseMS)
		if c.LockDelayMS != 0 {
			out += fmt.Sprintf(" lock_delay=%dms", c.LockDelayMS)
		}
		if c.Mode == core.ModeShared {
			out += " shared"
		}
		if c.Limit > 0 {
			out += fmt.Sprintf(" limit=%d", c.Limit)
		}
		if c.Session != 0 {
			out += fmt.Sprintf(" session=%d", c.Session)
		}
		return out
	case core.OpCreateSession:
		return fmt.Sprintf("create-session ttl=%dms", c.LeaseMS)
	case core.OpKeepAliveSession, core.OpCloseSession:
		return fmt.Sprintf("%s session=%d", c.Op, c.Session)
	case core.OpExpireSession:
		return fmt.Sprintf("expire-session session=%d seen=%d", c.Session, c.SeenIndex)
	case core.OpExpire:
		return fmt.Sprintf("expire %s token=%d seen=%d", c.Key, c.Token, c.SeenIndex)
	case core.OpRelease, core.OpRenew:
		return fmt.Sprintf("%s %s token=%d", strings.ToLower(c.Op.String()), c.Key, c.Token)
	}
	return strings.ToLower(c.Op.String())
}

func resString(r core.Result) string {
	switch r.Outcome {
	case core.OutcomeGranted:
		if !r.Created {
			return fmt.Sprintf("granted token=%d existing", r.Token)
		}
		return fmt.Sprintf("granted token=%d", r.Token)
	case core.OutcomeGrantRejected:
		return fmt.Sprintf("rejected holder=%d", r.Token)
	case core.OutcomeExpired:
		if r.Ended != nil {
			return fmt.Sprintf("expired existed=%t locks=%s%s", r.Existed, locksList(r.Ended.Locks), delaysString(r.Ended.Delays))
		}
		return fmt.Sprintf("expired existed=%t", r.Existed)
	case core.OutcomeReleased:
		if r.Ended != nil {
			return fmt.Sprintf("released locks=%s%s", locksList(r.Ended.Locks), delaysString(r.Ended.Delays))
		}
	case core.OutcomeRenewed:
		return fmt.Sprintf("renewed lease=%dms", r.LeaseMS)
	case core.OutcomeSessionCreated:
		return fmt.Sprintf("session-created session=%d ttl=%dms", r.Session, r.LeaseMS)
	case core.OutcomeLimitMismatch:
		return fmt.Sprintf("limit-mismatch limit=%d", r.Limit)
	}
	return strings.ToLower(r.Outcome.String())
}

// replyString is what the client hears: the connect code errmap gives, or
// the reply.
func replyString(op *clientOp, r opResult) string {
	if r.err != nil {
		return "error " + connect.CodeOf(connectErr(r.err)).String()
	}
	switch op.kind {
	case "acquire":
		return fmt.Sprintf("granted token=%d", r.res.Token)
	case "renew":
		return fmt.Sprintf("renewed lease=%dms", r.res.LeaseMS)
	case "create-session":
		return fmt.Sprintf("session=%d ttl=%dms", r.res.Session, r.res.LeaseMS)
	case "keepalive":
		return fmt.Sprintf("kept-alive ttl=%dms", r.res.LeaseMS)
	case "close-session":
		return "closed"
	case "get":
		return r.read
	}
	return "released"
}

// connectErr maps err as a handler would (errmap.go), without leader hints.
func connectErr(err error) error { return connect.NewError(codeOf(err), err) }

// checker holds what clients were told and checks the invariants of the
// interleaving property (interleave_test.go); violations are also printed as
// events by the scripts.
type checker struct {
	ackEnd    map[lockID]time.Time // latest lease end acknowledged to a client (send time + lease)
	delivered map[lockID]bool      // tokens handed to a client by Acquire
	lastToken uint64               // highest token granted, cluster-wide
	kind      map[lockID]lockKind  // mode and limit of each token handed to a client
	delayEnd  map[string]time.Time // end of each key's lock-delay (from the Expire's or session end's apply)
	// clientRemoved are the holders a client's Release or CloseSession
	// removed: a client may send one while an Acquire that returns that
	// holder (a retry by its owner, or a grant under the session) is in
	// flight, and the Acquire, applied first, is answered after it (I1).
	clientRemoved map[lockID]bool
	sess          sessionCheck // sessions (I10, harness_session_test.go)
	bound         boundCheck   // the lease bound (I11, harness_bound_test.go)
	violations    []string
}

func (c *checker) init() {
	c.ackEnd = map[lockID]time.Time{}
	c.delivered = map[lockID]bool{}
	c.kind = map[lockID]lockKind{}
	c.delayEnd = map[string]time.Time{}
	c.clientRemoved = map[lockID]bool{}
	c.sess.init()
	c.bound.init()
}

func (c *checker) violate(inv, format string, args ...any) {
	c.violations = append(c.violations, inv+": "+fmt.Sprintf(format, args...))
}

// applied checks one applied command: I2 (no early expiry), I4 (tokens
// per key strictly increase) and I6 (no grant of a key during its lock-delay).
func (c *checker) applied(now time.Time, cmd core.Command, res core.Result) {
	id := lockID{cmd.Key, res.Token}
	switch {
	case cmd.Op == core.OpGrant && res.Outcome == core.OutcomeGranted && res.Created:
		if res.Token <= c.lastToken {
			c.violate("I4", "token %d granted on %s after token %d", res.Token, cmd.Key, c.lastToken)
		}
		c.lastToken = res.Token
		if end, ok := c.delayEnd[cmd.Key]; ok && now.Before(end) {
			c.violate("I6", "%s granted token %d %s before its lock-delay ends", cmd.Key, res.Token, end.Sub(now))
		}
		delete(c.delayEnd, cmd.Key)
	case cmd.Op == core.OpExpire && res.Existed:
		id.token = cmd.Token
		if end, ok := c.ackEnd[id]; ok && now.Before(end) {
			c.violate("I2", "%s/%d expired %s before the lease acknowledged to its client ends", id.key, id.token, end.Sub(now))
		}
		if res.LockDelayMS > 0 {
			c.delayEnd[cmd.Key] = now.Add(ms(res.LockDelayMS))
		}
	}
	// An Expire that removed nothing (renewed since the leader decided) leaves
	// the acknowledged lease in force.
	if cmd.Op == core.OpRelease || (cmd.Op == core.OpExpire && res.Existed) {
		delete(c.ackEnd, lockID{cmd.Key, cmd.Token})
		delete(c.sess.under, lockID{cmd.Key, cmd.Token})
	}
}

// answered checks a reply heard by a client: I1 (a returned token is held
// and not being removed),
// I4 (one holder per key among live acknowledged leases) and I7 (an Acquire
// without wait is refused only if the table showed the key held by another
// owner during the call); h.mu held.
func (c *checker) answered(h *harness, op *clientOp) {
	if op.res.err != nil {
		if op.kind == "acquire" && !op.wait && codeOf(op.res.err) == connect.CodeAlreadyExists && !op.sawHeld {
			c.violate("I7", "%s (%s, without wait) refused with already_exists, but the applied table never showed %s held by another owner during the call",
				op.name, op.owner, op.id.key)
		}
		return
	}
	c.bound.answered(h.clock.Now(), op)
	switch op.kind {
	case "acquire":
		id := lockID{op.id.key, op.res.res.Token}
		lk, ok := h.n.sm.Holder(id.key, id.token)
		switch {
		case !ok && !c.clientRemoved[id]:
			c.violate("I1", "%s got %s/%d, which is not held", op.name, id.key, id.token)
		case ok && h.n.ending(lk) && (lk.Session == 0 || !h.n.lessor.Closing(lk.Session)):
			c.violate("I1", "%s got %s/%d, which is being removed (its Expire, or its session's, is decided or in flight)",
				op.name, id.key, id.token)
		}
		c.delivered[id] = true
		c.kind[id] = lockKind{lk.Mode, lk.Limit} // the holder's: a retry may have asked another mode
		if s := op.res.res.Session; s != 0 {
			c.sess.under[id] = s // it lives as long as its session (I10)
		} else {
			c.ack(id, op.sent.Add(ms(op.res.res.LeaseMS))) // the lease the reply states
		}
		c.acknowledged(h.clock.Now(), op.name, id)
		if op.mode == core.ModeShared && op.res.res.Created {
			c.fifo(h, op)
		}
	case "renew":
		h.learnKind(op.id)
		c.ack(op.id, op.sent.Add(ms(op.res.res.LeaseMS)))
	case "release":
		delete(c.ackEnd, op.id)
		delete(c.sess.under, op.id)
	case "create-session", "keepalive":
		c.sessionAnswered(op)
	}
}

// learnKind records id's mode and limit from the lock table for I4 when a
// lease of it is acknowledged by a renewal: its holder may be one no client
// was told of (its Acquire's answer was lost to a demotion, and the grant
// committed in a later term). h.mu held.
func (h *harness) learnKind(id lockID) {
	if _, known := h.check.kind[id]; known {
		return
	}
	if lk, ok := h.n.sm.Holder(id.key, id.token); ok {
		h.check.kind[id] = lockKind{lk.Mode, lk.Limit}
	}
}

// lockKind is the mode and limit a lock was acquired with.
type lockKind struct {
	mode  core.Mode
	limit uint32
}

// exclusive reports whether the lock excludes every other holder.
func (k lockKind) exclusive() bool { return k.mode != core.ModeShared && k.limit == 0 }

// acknowledged checks I4 for id just handed to client name: among the
// leases acknowledged to clients and not yet over on id's key, none is
// exclusive beside another, and a semaphore has at most its limit.
func (c *checker) acknowledged(now time.Time, name string, id lockID) {
	live := 0
	var excl []lockID
	count := func(other lockID, end time.Time) {
		if other.key != id.key || !now.Before(end) {
			return
		}
		live++
		if c.kind[other].exclusive() {
			excl = append(excl, other)
		}
	}
	for other, end := range c.ackEnd {
		count(other, end)
	}
	for other, s := range c.sess.under { // a holder under a session: its session's acknowledged end
		count(other, c.sess.ackEnd[s])
	}
	k := c.kind[id]
	switch {
	case len(excl) > 0 && live > 1:
		c.violate("I4", "%s got %s/%d while %d leases on %s are acknowledged, exclusive %v among them", name, id.key, id.token, live, id.key, excl)
	case k.limit > 0 && live > int(k.limit):
		c.violate("I4", "%s got %s/%d: %d leases acknowledged on a semaphore of limit %d", name, id.key, id.token, live, k.limit)
	}
}

// table checks I8 on key's holders after an apply: at most limit holders on
// a semaphore, and no exclusive holder beside another.
func (c *checker) table(key string, holders []core.Lock) {
	if len(holders) < 2 {
		return
	}
	first := holders[0]
	switch {
	case first.Limit > 0 && len(holders) > int(first.Limit):
		c.violate("I8", "%s has %d holders, limit %d", key, len(holders), first.Limit)
	case first.Limit == 0:
		for _, lk := range holders {
			if lk.Mode != core.ModeShared {
				c.violate("I8", "%s has an exclusive holder (token %d) beside %d others", key, lk.Token, len(holders)-1)
				break
			}
		}
	}
}

// fifo checks I9 for op, a shared Acquire just granted a new holder: no
// exclusive Acquire with wait on the same key sent before op is still
// waiting (FIFO across modes, writer preference), unless that request lost
// its place (its own grant was rejected: the defensive path re-queues it),
// or op's owner sent an Acquire of the key before it: the server takes op
// for a retry of that request (owner ids name requests), which keeps the
// earlier request's place. h.mu held.
func (c *checker) fifo(h *harness, op *clientOp) {
	retryOfEarlier := false
	for _, name := range h.opOrder {
		if name == op.name {
			return
		}
		w := h.ops[name]
		if w.kind == "acquire" && w.id.key == op.id.key && w.owner == op.owner {
			retryOfEarlier = true
		}
		if !retryOfEarlier && w.kind == "acquire" && w.wait && !w.done && !w.gone && !w.lostPlace && w.id.key == op.id.key &&
			w.mode != core.ModeShared && w.limit == 0 {
			c.violate("I9", "%s (shared) was granted %s/%d while %s (exclusive, sent before it) still waits",
				op.name, op.id.key, op.res.res.Token, w.name)
		}
	}
}

func (c *checker) ack(id lockID, end time.Time) { laterEnd(c.ackEnd, id, end) }

// tick forgets leases that have ended by now.
func (c *checker) tick(now time.Time) {
	for id, end := range c.ackEnd {
		if !now.Before(end) {
			delete(c.ackEnd, id)
		}
	}
}

func ms(n int64) time.Duration { return time.Duration(n) * time.Millisecond }
