package sdk

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"iter"
	"strings"
	"time"
)

// ErrNoLeader: the election has no leader (nobody holds its lock).
var ErrNoLeader = errors.New("ticketd: election has no leader")

// Election is the leader-election recipe on top of Lock and Watch, like
// etcd's concurrency.Election and Curator's LeaderLatch: a candidate is
// leader while it holds the election's lock (key = the election name), and
// the lock's fencing token is its term. Terms strictly increase across the
// cluster, so a resource that remembers the highest term it has seen
// refuses a deposed leader (Chubby §2.4 sequencer). At most one candidate
// holds the lock at a time; candidates wait in the key's FIFO queue.
//
// The candidate's value travels in the lock's owner id as VALUE#RANDOM (the
// suffix keeps two candidates with the same value apart), so VALUE is at
// most 111 bytes of text without control characters. An Election is safe for
// concurrent use.
type Election struct {
	c   *Client
	ttl time.Duration
}

// NewElection returns the election recipe over c. ttl is each leadership's
// lease (whole milliseconds within the server's bounds): a leader that dies
// is replaced at most about ttl after its last renewal. The leader's lease
// renews itself as any Lease does.
func NewElection(c *Client, ttl time.Duration) *Election { return &Election{c: c, ttl: ttl} }

// Leader is an election's leader as others see it.
type Leader struct {
	// Name is the election name (its lock key).
	Name string
	// Value is what the leader campaigned with.
	Value string
	// Term is the fencing token of the leader's lock: strictly greater than
	// every earlier leader's term of any election.
	Term uint64
}

// Leadership is a won election: the campaigner is leader until Done is
// closed (its lease was lost, or Resign).
type Leadership struct {
	lease *Lease
	value string
}

// Term is the leadership's term (its lock's fencing token).
func (l *Leadership) Term() uint64 { return l.lease.Token() }

// Value is the value the leader campaigned with.
func (l *Leadership) Value() string { return l.value }

// Done is closed when the leadership ends: Resign, or the lease was lost
// (then stop acting as leader at once; Err says why).
func (l *Leadership) Done() <-chan struct{} { return l.lease.Done() }

// Err is nil while leader, then wraps ErrReleased (Resign) or ErrLeaseLost.
func (l *Leadership) Err() error { return l.lease.Err() }

// Resign gives the leadership up (releases the lock), so the next
// candidate in line becomes leader. Errors: Unlock's.
func (l *Leadership) Resign(ctx context.Context) error { return l.lease.Unlock(ctx) }

// Campaign waits until this candidate is leader of election name and
// returns the leadership, or fails when ctx ends. value is published to
// observers (Leader, Observe).
//
// Errors: ErrInvalidArgument (value too long or not text), and Lock's.
func (e *Election) Campaign(ctx context.Context, name, value string) (*Leadership, error) {
	if len(value) > 111 || strings.ContainsAny(value, "\x00") {
		return nil, fmt.Errorf("campaign %q: %w: value must be at most 111 bytes of text", name, ErrInvalidArgument)
	}
	var b [8]byte
	_, _ = rand.Read(b[:])
	owner := value + "#" + hex.EncodeToString(b[:])
	lease, err := e.c.Lock(ctx, name, e.ttl, WithOwner(owner))
	if err != nil {
		return nil, err
	}
	return &Leadership{lease: lease, value: value}, nil
}

// valueOf is the campaign value encoded in an owner id.
func valueOf(owner string) string {
	if i := strings.LastIndexByte(owner, '#'); i >= 0 {
		return owner[:i]
	}
	return owner
}

// Leader returns the current leader of election name (linearizable).
// Errors: ErrNoLeader, and GetLock's.
func (e *Election) Leader(ctx context.Context, name string) (Leader, error) {
	info, err := e.c.GetLock(ctx, name)
	if err != nil {
		return Leader{}, err
	}
	if !info.Held {
		return Leader{}, fmt.Errorf("leader %q: %w", name, ErrNoLeader)
	}
	return Leader{Name: name, Value: valueOf(info.Owner), Term: info.Token}, nil
}

// Observe yields the leader of election name once the watch behind it has
// started (a Leader with Term 0 if nobody leads then), and then every
// change: a Leader with Term 0 means "no leader" (the last one resigned or
// its lease ran out). Terms of successive leaders strictly increase. It
// survives node failures as Watch does (after a relist it yields the leader
// then, if that changed), and ends after yielding ctx's error.
func (e *Election) Observe(ctx context.Context, name string) iter.Seq2[Leader, error] {
	return func(yield func(Leader, error) bool) {
		var cur, shown Leader // cur: the leader as the watch knows it; shown: the last yielded
		shownAny := false     // something was yielded
		show := func() bool {
			if shownAny && cur == shown {
				return true
			}
			shownAny, shown = true, cur
			return yield(cur, nil)
		}
		for ev, err := range e.c.Watch(ctx, name, WithExisting(), WithStartedEvents()) {
			if err != nil {
				yield(Leader{}, err)
				return
			}
			switch {
			case ev.Type == EventReset:
				cur = Leader{Name: name} // the held lock, if any, follows
				continue
			case ev.Type == EventStarted:
				if cur.Name == "" {
					cur = Leader{Name: name} // nobody leads
				}
			case ev.Key != name:
				continue // another election whose name starts with this one
			case ev.Type == EventGranted:
				cur = Leader{Name: name, Value: valueOf(ev.Owner), Term: ev.Token}
			case ev.Type == EventReleased || ev.Type == EventExpired:
				if ev.Token == cur.Term {
					cur = Leader{Name: name}
				}
			default:
				continue
			}
			if !show() {
				return
			}
		}
	}
}
