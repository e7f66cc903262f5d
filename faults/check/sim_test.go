package check_test

import (
	"container/heap"
	"fmt"
	"math/rand"

	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/faults/history"
)

// sim is a discrete-event simulation of a lock service with concurrent
// clients: each call takes effect at one instant between its call and its
// return, expiry happens after the server-side deadline, unanswered calls
// become Unknown, and a client that gave up on an Acquire leaves a ghost
// lock that the server releases. With bug == "" it behaves correctly; the
// other bugs are the kinds of mistake the checkers must catch.
type sim struct {
	rng     *rand.Rand
	bug     string
	now     int64 // ms
	seq     int
	events  eventQueue
	locks   map[string]*simLock
	last    uint64
	waiters map[string][]*simCall
	ops     []history.Op
	clients []*simClient
	keys    []string
	nextOwn int
	// restartAt is when the token_reuse and lost_grant bugs strike.
	restartAt int64
	restarted bool
	// past records every key's lock after each change, for the stale_read bug.
	past map[string][]simPast
}

type simPast struct {
	at   int64
	lock simLock
	held bool
}

// record notes key's lock as of now (for stale reads).
func (s *sim) record(key string) {
	if s.past == nil {
		s.past = map[string][]simPast{}
	}
	p := simPast{at: s.now}
	if l := s.locks[key]; l != nil {
		p.lock, p.held = *l, true
	}
	s.past[key] = append(s.past[key], p)
}

// stale returns key's lock as it was 80ms ago.
func (s *sim) stale(key string) (simLock, bool) {
	var out simPast
	for _, p := range s.past[key] {
		if p.at > s.now-80 {
			break
		}
		out = p
	}
	return out.lock, out.held
}

type simLock struct {
	token    uint64
	owner    string
	lease    int64
	deadline int64
	ghost    bool
}

type simClient struct {
	id    int
	left  int
	held  *simHeld
	retry *history.Op // an Unknown Acquire to retry with the same owner
}

type simHeld struct {
	key   string
	token uint64
}

type simCall struct {
	op      history.Op
	client  *simClient
	unknown bool // the client gives up: the outcome is recorded as Unknown
	dropped bool // never reaches the server
	done    bool
}

type event struct {
	at  int64
	seq int
	fn  func()
}

type eventQueue []event

func (q eventQueue) Len() int { return len(q) }
func (q eventQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q eventQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *eventQueue) Push(x any)   { *q = append(*q, x.(event)) }
func (q *eventQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	*q = old[:len(old)-1]
	return e
}

func (s *sim) at(t int64, fn func()) {
	s.seq++
	heap.Push(&s.events, event{at: t, seq: s.seq, fn: fn})
}

// simulate runs clients clients for opsPerClient calls each over keys keys.
func simulate(seed int64, bug string, clients, keys, opsPerClient int) []history.Op {
	s := &sim{
		rng: rand.New(rand.NewSource(seed)), bug: bug,
		locks: map[string]*simLock{}, waiters: map[string][]*simCall{},
	}
	for i := range keys {
		s.keys = append(s.keys, fmt.Sprintf("k%d", i))
	}
	s.restartAt = int64(opsPerClient) * 15 / 2
	for i := range clients {
		c := &simClient{id: i, left: opsPerClient}
		s.clients = append(s.clients, c)
		s.at(int64(s.rng.Intn(20)), func() { s.call(c) })
	}
	for s.events.Len() > 0 {
		e := heap.Pop(&s.events).(event)
		s.now = e.at
		if !s.restarted && s.now >= s.restartAt && (bug == "token_reuse" || bug == "lost_grant") {
			s.restarted = true
			s.locks = map[string]*simLock{}
			if bug == "token_reuse" && s.last > 3 {
				s.last -= 3
			}
		}
		e.fn()
	}
	// Final reads after everything, as a run's durability phase does.
	for _, k := range s.keys {
		op := history.Op{ID: len(s.ops), Client: clients, Kind: history.Get, Key: k, Call: (s.now + 1) * ms, Return: (s.now + 2) * ms, Outcome: history.OK, Tag: "final"}
		if l := s.locks[k]; l != nil && l.deadline > s.now {
			op.Held, op.HolderToken, op.HolderOwner = true, l.token, l.owner
		} else {
			delete(s.locks, k)
		}
		s.ops = append(s.ops, op)
	}
	return s.ops
}

func (s *sim) pick(p float64) bool { return s.rng.Float64() < p }

func (s *sim) call(c *simClient) {
	if c.left == 0 {
		return
	}
	c.left--
	op := history.Op{Client: c.id, Key: s.keys[s.rng.Intn(len(s.keys))]}
	switch {
	case c.retry != nil:
		op = *c.retry
		op.Outcome, op.Code, op.Token = history.Pending, "", 0
		c.retry = nil
	case c.held != nil:
		op.Key, op.Token = c.held.key, c.held.token
		switch r := s.rng.Float64(); {
		case r < 0.4:
			op.Kind = history.Renew
		case r < 0.65:
			op.Kind = history.Release
		case r < 0.8:
			op.Kind = history.CheckToken
		case r < 0.9:
			op.Kind = history.Get
		default:
			c.held = nil // the holder dies: no release, no renewal
			op.Kind = history.Get
		}
	case s.pick(0.6):
		s.nextOwn++
		op.Kind, op.Owner = history.Acquire, fmt.Sprintf("c%d-%d", c.id, s.nextOwn)
		op.LeaseMS = []int64{150, 300}[s.rng.Intn(2)]
		op.Wait = s.pick(0.2)
	case s.pick(0.5):
		op.Kind = history.Get
	default:
		op.Kind, op.Token = history.CheckToken, uint64(1+s.rng.Intn(int(s.last)+1))
	}
	op.ID = len(s.ops)
	op.Call = s.now * ms
	op.Outcome = history.Pending
	s.ops = append(s.ops, op)
	sc := &simCall{op: op, client: c}
	mutates := op.Kind != history.Get && op.Kind != history.CheckToken
	switch {
	case mutates && s.pick(0.04):
		sc.dropped, sc.unknown = true, true
		s.at(s.now+1+int64(s.rng.Intn(60)), func() { s.finish(sc) })
	default:
		sc.unknown = mutates && s.pick(0.08)
		s.at(s.now+1+int64(s.rng.Intn(15)), func() { s.point(sc) })
	}
}

// point applies sc at s.now and schedules its return.
func (s *sim) point(sc *simCall) {
	op := &sc.op
	l := s.locks[op.Key]
	switch op.Kind {
	case history.Acquire:
		switch {
		case l == nil:
			s.grant(sc)
			return
		case l.owner == op.Owner && !l.ghost:
			l.deadline = max(l.deadline, s.now+op.LeaseMS)
			op.Outcome, op.Token, op.ResLeaseMS = history.OK, l.token, l.lease
		case op.Wait:
			s.waiters[op.Key] = append(s.waiters[op.Key], sc)
			s.at(s.now+2*op.LeaseMS, func() { s.giveUp(sc) })
			return
		default:
			op.Outcome, op.Code = history.Fail, connect.CodeAlreadyExists.String()
		}
	case history.Release:
		if l != nil && l.token == op.Token {
			op.Outcome = history.OK
			if !(s.bug == "lost_release" && s.pick(0.5)) {
				s.free(op.Key)
			}
		} else {
			op.Outcome, op.Code = history.Fail, connect.CodeNotFound.String()
		}
	case history.Renew:
		if s.bug == "stale_renew_refusal" && l != nil && l.token == op.Token && s.pick(0.2) {
			op.Outcome, op.Code = history.Fail, connect.CodeNotFound.String()
		} else if l != nil && l.token == op.Token && s.now < l.deadline {
			if s.bug != "ignore_renew" {
				l.deadline = s.now + l.lease
			}
			l.ghost = false
			op.Outcome, op.ResLeaseMS = history.OK, l.lease
		} else {
			op.Outcome, op.Code = history.Fail, connect.CodeNotFound.String()
		}
	case history.Get:
		op.Outcome = history.OK
		if s.bug == "stale_read" {
			if sl, held := s.stale(op.Key); held {
				op.Held, op.HolderToken, op.HolderOwner = true, sl.token, sl.owner
			}
		} else if l != nil {
			op.Held, op.HolderToken, op.HolderOwner = true, l.token, l.owner
		}
	case history.CheckToken:
		op.Outcome = history.OK
		if l != nil {
			op.Valid, op.HolderToken = l.token == op.Token, l.token
		}
	}
	s.at(s.now+1+int64(s.rng.Intn(15)), func() { s.finish(sc) })
}

func (s *sim) grant(sc *simCall) {
	op := &sc.op
	s.last++
	deadline := s.now + op.LeaseMS
	if s.bug == "early_expiry" {
		deadline = s.now + op.LeaseMS/3
	}
	l := &simLock{token: s.last, owner: op.Owner, lease: op.LeaseMS, deadline: deadline, ghost: sc.unknown}
	s.locks[op.Key] = l
	s.record(op.Key)
	op.Outcome, op.Token, op.ResLeaseMS = history.OK, l.token, l.lease
	if s.bug == "double_grant" && s.pick(0.3) {
		delete(s.locks, op.Key) // forgets the lock it just granted
	}
	s.watch(op.Key, l)
	if sc.unknown {
		// The client is gone: the server releases the ghost lock a little later.
		s.at(s.now+int64(s.rng.Intn(40)), func() {
			if s.locks[op.Key] == l {
				s.free(op.Key)
			}
		})
	}
	s.at(s.now+1+int64(s.rng.Intn(15)), func() { s.finish(sc) })
}

// watch expires l once its deadline has passed (with some commit delay).
func (s *sim) watch(key string, l *simLock) {
	s.at(l.deadline+int64(s.rng.Intn(30)), func() {
		if s.locks[key] != l {
			return
		}
		if s.now < l.deadline {
			s.watch(key, l) // renewed meanwhile
			return
		}
		s.free(key)
	})
}

func (s *sim) free(key string) {
	delete(s.locks, key)
	s.record(key)
	q := s.waiters[key]
	for len(q) > 0 {
		sc := q[0]
		q = q[1:]
		if !sc.done {
			s.waiters[key] = q
			s.grant(sc)
			return
		}
	}
	s.waiters[key] = q
}

func (s *sim) giveUp(sc *simCall) {
	if sc.op.Outcome != history.Pending {
		return // granted meanwhile
	}
	sc.done = true
	sc.op.Outcome, sc.op.Code = history.Unknown, connect.CodeDeadlineExceeded.String()
	s.finish(sc)
}

// finish records sc's return and schedules the client's next call.
func (s *sim) finish(sc *simCall) {
	op := sc.op
	op.Return = s.now * ms
	c := sc.client
	if sc.unknown {
		op.Outcome, op.Code = history.Unknown, "deadline_exceeded"
		op.ResLeaseMS = 0
		if op.Kind == history.Acquire {
			op.Token = 0 // the client never learns the token
		}
	}
	if op.Outcome == history.Pending {
		op.Outcome = history.Unknown
	}
	s.ops[op.ID] = op
	switch {
	case op.Kind == history.Acquire && op.Outcome == history.OK:
		c.held = &simHeld{key: op.Key, token: op.Token}
	case op.Kind == history.Acquire && op.Outcome == history.Unknown && s.pick(0.5):
		c.retry = &op
	case op.Kind == history.Release:
		c.held = nil
	case op.Kind == history.Renew && op.Outcome == history.Fail:
		c.held = nil
	}
	s.at(s.now+int64(s.rng.Intn(40)), func() { s.call(c) })
}
