package check_test

import (
	"container/heap"
	"fmt"
	"math/rand"
	"os"
	"slices"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/anishathalye/porcupine"

	"github.com/ticketd/ticketd/faults/check"
	"github.com/ticketd/ticketd/faults/history"
)

// holderSim is a discrete-event simulation of a lock service with shared
// locks and semaphores and concurrent clients: each call takes
// effect at one instant between its call and its return, a holder expires
// some time after its server-side deadline, and a call may go unanswered
// (Unknown) whether or not it took effect. With bug == "" it behaves
// correctly; the other bugs are the mistakes the checkers must catch.
type holderSim struct {
	rng     *rand.Rand
	bug     string
	last    uint64
	keys    map[string][]*simHolder
	ops     []history.Op
	events  simEvents
	dupDone bool
}

type simHolder struct {
	owner    string
	token    uint64
	shared   bool
	limit    uint32
	deadline int64 // ms
	expireAt int64 // ms: when the server removes it
}

// holderSimKeys: two readers-writer keys and two semaphores.
var holderSimKeys = []struct {
	key   string
	limit uint32
}{{"rw/0", 0}, {"rw/1", 0}, {"sem/0", 2}, {"sem/1", 3}}

type simEvent struct {
	at     int64
	seq    int
	client int
	op     *history.Op // the op in flight; nil: the client's next call
	effect bool        // true: the op takes effect now; false: it returns now
	apply  bool        // whether the op takes effect at all (Unknown ops may not)
}

type simEvents []*simEvent

func (e simEvents) Len() int { return len(e) }
func (e simEvents) Less(i, j int) bool {
	if e[i].at != e[j].at {
		return e[i].at < e[j].at
	}
	return e[i].seq < e[j].seq
}
func (e simEvents) Swap(i, j int) { e[i], e[j] = e[j], e[i] }
func (e *simEvents) Push(x any)   { *e = append(*e, x.(*simEvent)) }
func (e *simEvents) Pop() any {
	old := *e
	x := old[len(old)-1]
	*e = old[:len(old)-1]
	return x
}

// simulateHolders runs clients for opsPerClient calls each and returns the history.
func simulateHolders(seed int64, bug string, clients, opsPerClient int) []history.Op {
	s := &holderSim{rng: rand.New(rand.NewSource(seed)), bug: bug, keys: map[string][]*simHolder{}}
	type clientState struct {
		left  int
		held  map[string]uint64
		seq   int
		owner map[string]*history.Op // per key, the Acquire that got the lock held
	}
	cs := make([]*clientState, clients)
	seq := 0
	push := func(e *simEvent) { seq++; e.seq = seq; heap.Push(&s.events, e) }
	for c := range cs {
		cs[c] = &clientState{left: opsPerClient, held: map[string]uint64{}, owner: map[string]*history.Op{}}
		push(&simEvent{at: int64(s.rng.Intn(20)), client: c})
	}
	const leaseMS = 300
	for s.events.Len() > 0 {
		e := heap.Pop(&s.events).(*simEvent)
		s.expire(e.at)
		c := cs[e.client]
		switch {
		case e.op == nil: // the next call
			if c.left == 0 {
				continue
			}
			c.left--
			k := holderSimKeys[s.rng.Intn(len(holderSimKeys))]
			op := &history.Op{Client: e.client, Key: k.key, Call: e.at * ms}
			tok, holds := c.held[k.key]
			switch r := s.rng.Float64(); {
			case holds && r < 0.3:
				op.Kind, op.Token = history.Release, tok
			case holds && r < 0.5:
				op.Kind, op.Token = history.Renew, tok
			case r < 0.65:
				op.Kind = history.Get
			case r < 0.75:
				op.Kind, op.Token = history.CheckToken, tok
				if !holds {
					op.Token = 1 + uint64(s.rng.Int63n(int64(s.last)+1))
				}
			default:
				c.seq++
				op.Kind, op.Owner, op.LeaseMS, op.Limit = history.Acquire, fmt.Sprintf("c%d-%d", e.client, c.seq), leaseMS, k.limit
				op.Shared = k.limit == 0 && s.rng.Float64() < 0.6
				if holds { // a retry of the lock it holds
					op.Owner, op.Shared = c.owner[k.key].Owner, c.owner[k.key].Shared
				}
			}
			unknown := s.rng.Float64() < 0.05
			op.Outcome = history.OK
			if unknown {
				op.Outcome = history.Unknown
			}
			push(&simEvent{at: e.at + 1 + int64(s.rng.Intn(15)), client: e.client, op: op, effect: true, apply: !unknown || s.rng.Float64() < 0.5})
		case e.effect:
			if e.apply {
				s.apply(e.at, e.op, leaseMS)
			}
			if e.op.Outcome == history.Unknown {
				e.op.Return = e.op.Call + int64(200+s.rng.Intn(100))*ms
				*e.op = scrubUnknown(*e.op)
			}
			push(&simEvent{at: max(e.at+1+int64(s.rng.Intn(15)), e.op.Return/ms), client: e.client, op: e.op})
		default: // the return
			op := e.op
			if op.Outcome != history.Unknown {
				op.Return = e.at * ms
			}
			switch {
			case op.Kind == history.Acquire && op.Outcome == history.OK:
				c.held[op.Key], c.owner[op.Key] = op.Token, op
			case op.Kind == history.Release || (op.Kind == history.Renew && op.Outcome != history.OK):
				delete(c.held, op.Key)
			}
			op.ID = len(s.ops)
			s.ops = append(s.ops, *op)
			push(&simEvent{at: e.at + int64(s.rng.Intn(30)), client: e.client})
		}
	}
	slices.SortStableFunc(s.ops, func(a, b history.Op) int { return int(a.Call - b.Call) })
	for i := range s.ops {
		s.ops[i].ID = i
	}
	return s.ops
}

// scrubUnknown drops the outputs of an op whose answer never came.
func scrubUnknown(op history.Op) history.Op {
	op.Token = map[bool]uint64{true: op.Token}[op.Kind != history.Acquire]
	op.Valid, op.Held, op.Holders, op.HolderToken, op.ResLeaseMS, op.Code = false, false, nil, 0, 0, "deadline_exceeded"
	op.KeyShared, op.KeyLimit = false, 0
	return op
}

// expire removes the holders the server has expired by now.
func (s *holderSim) expire(now int64) {
	for k, hs := range s.keys {
		s.keys[k] = slices.DeleteFunc(hs, func(h *simHolder) bool { return h.expireAt <= now })
	}
}

func (s *holderSim) admits(hs []*simHolder, shared bool, limit uint32) bool {
	if len(hs) == 0 {
		return true
	}
	if limit > 0 {
		n := len(hs)
		if s.bug == "semaphore_overflow" {
			n-- // one slot too many
		}
		return n < int(limit)
	}
	if !shared {
		return false
	}
	for _, h := range hs {
		if !h.shared && s.bug != "shared_beside_exclusive" {
			return false
		}
	}
	return true
}

// apply is op's effect at now (ms), filling its outputs.
func (s *holderSim) apply(now int64, op *history.Op, leaseMS int64) {
	hs := s.keys[op.Key]
	find := func(tok uint64) *simHolder {
		for _, h := range hs {
			if h.token == tok {
				return h
			}
		}
		return nil
	}
	alive := func(h *simHolder) bool { return h != nil && now <= h.deadline }
	switch op.Kind {
	case history.Acquire:
		for _, h := range hs {
			if h.owner == op.Owner {
				op.Token, op.ResLeaseMS = h.token, leaseMS
				h.deadline = now + leaseMS
				h.expireAt = max(h.expireAt, h.deadline+int64(s.rng.Intn(50)))
				return
			}
		}
		if !s.admits(hs, op.Shared, op.Limit) {
			op.Outcome, op.Code = history.Fail, connect.CodeAlreadyExists.String()
			return
		}
		s.last++
		tok := s.last
		if s.bug == "dup_token" && !s.dupDone && len(hs) > 0 {
			tok, s.dupDone = hs[len(hs)-1].token, true
			s.last--
		}
		h := &simHolder{owner: op.Owner, token: tok, shared: op.Shared, limit: op.Limit, deadline: now + leaseMS}
		h.expireAt = h.deadline + int64(s.rng.Intn(50))
		s.keys[op.Key] = append(hs, h)
		op.Token, op.ResLeaseMS = tok, leaseMS
	case history.Release:
		if h := find(op.Token); h != nil {
			s.keys[op.Key] = slices.DeleteFunc(hs, func(x *simHolder) bool { return x == h })
			return
		}
		op.Outcome, op.Code = history.Fail, connect.CodeNotFound.String()
	case history.Renew:
		if h := find(op.Token); alive(h) {
			h.deadline = now + leaseMS
			h.expireAt = max(h.expireAt, h.deadline+int64(s.rng.Intn(50)))
			op.ResLeaseMS = leaseMS
			return
		}
		op.Outcome, op.Code = history.Fail, connect.CodeNotFound.String()
	case history.Get:
		op.Held = len(hs) > 0
		for _, h := range hs {
			op.Holders = append(op.Holders, history.Holder{Token: h.token, Owner: h.owner})
			op.KeyShared, op.KeyLimit = h.shared, h.limit
		}
	case history.CheckToken:
		op.Valid = alive(find(op.Token))
		if len(hs) > 0 {
			h := hs[len(hs)-1]
			op.HolderToken, op.KeyShared, op.KeyLimit = h.token, h.shared, h.limit
		}
	}
}

// TestSimulatedHoldersServicePasses: concurrent histories of a correct
// service with shared locks and semaphores, with expiry, retries and
// unanswered calls, are never flagged, and porcupine decides each quickly.
func TestSimulatedHoldersServicePasses(t *testing.T) {
	t.Parallel()
	type size struct {
		seed             int64
		clients, perEach int
	}
	var sizes []size
	for seed := int64(1); seed <= 30; seed++ {
		sizes = append(sizes, size{seed, 8, 80})
	}
	// Long histories with many holders at once (a dozen expired shared
	// holders is what made the first version of the model time out).
	for seed := int64(31); seed <= 33; seed++ {
		sizes = append(sizes, size{seed, 14, 300})
	}
	for _, sz := range sizes {
		seed := sz.seed
		ops := simulateHolders(seed, "", sz.clients, sz.perEach)
		r := check.Run(check.Input{Ops: ops, Timeout: time.Minute})
		if r.Linearizability.Result != porcupine.Ok || r.Err() != nil {
			dir, err := os.MkdirTemp("", "check-holders-sim-")
			if err == nil {
				err = r.Write(dir, ops, nil)
			}
			t.Fatalf("seed %d: %s, %v (report in %s, %v)", seed, resultString(r.Linearizability.Result), r.Err(), dir, err)
		}
	}
}

// TestSimulatedHoldersBugsAreFlagged: the same workload against a service
// with one injected bug is flagged, by the property that bug breaks.
func TestSimulatedHoldersBugsAreFlagged(t *testing.T) {
	t.Parallel()
	cases := []struct {
		bug  string
		want check.Property
	}{
		{"semaphore_overflow", check.PropLinearizable},
		{"shared_beside_exclusive", check.PropLinearizable},
		{"dup_token", check.PropFencing},
	}
	for _, tc := range cases {
		t.Run(tc.bug, func(t *testing.T) {
			t.Parallel()
			flagged := 0
			for seed := int64(1); seed <= 10; seed++ {
				r := check.Run(check.Input{Ops: simulateHolders(seed, tc.bug, 8, 80), Timeout: time.Minute})
				if properties(r)[tc.want] {
					flagged++
				}
			}
			if flagged < 8 {
				t.Errorf("%s flagged in %d of 10 seeds, want at least 8", tc.want, flagged)
			}
		})
	}
}
