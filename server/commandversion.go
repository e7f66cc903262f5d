package server

import (
	"context"
	"fmt"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// This file is the leader's cluster command version: the highest version
// of replicated command (log entry envelope, core.Encode) that every member
// of the configuration is known to apply, as etcd's leader decides its
// cluster version as the minimum of its members' server versions and
// enables a feature only once that minimum has it
// (docs/design.md#replicated-commands). Each node publishes the highest
// version its binary applies (StatusResponse.max_command_version,
// core.MaxCommandVersion). The promoted leader asks every member for it at
// promotion and again every few seconds while it leads, and decides the
// minimum after each round; a member that has not answered in this term
// is unknown, and unknown allows nothing new. The renewal path writes a
// RenewBatch (core.CommandVersion4) only while that minimum is 4 or more
// (renewbatch.go), so a node still running an older binary in a rolling
// upgrade never receives an entry it would stop on.
//
// Unlike etcd's, the decision is not replicated: each leader decides again
// for its own term, and until it has heard from every member it writes
// renewals one entry each (they are still committed and applied as
// before; only their sharing waits). A member that answered in this term
// keeps its answer while unreachable, as etcd keeps its cluster version
// when a member's version is unknown: a member comes back on the same
// binary or a newer one. One taken back to an older binary after batches
// were written is not covered: it stops, loudly, on the first batch it
// replays (docs/operations.md#upgrades).
//
// Members added later: entries of this leader's version may already be in
// the log, and a new member replays the log from the leader's last
// snapshot on, so AddMember refuses (admitCommandVersion) a member that
// says it applies less than this leader does. etcd refuses the same member
// on the member's own side (a joining etcd below the cluster version does
// not start); an older ticketd binary cannot refuse itself, so the leader
// does. A leader that writes batches thus admits no member that could not
// apply them, and the minimum it decided over the configuration stays true
// while it leads.

const (
	// commandVersionInterval is how often the promoted leader asks every
	// member again for the highest command version it applies (etcd's
	// leader checks its members' versions every few seconds).
	commandVersionInterval = 5 * time.Second
	// commandVersionRetry is how soon it asks again while a member is
	// unknown: one whose API address the directory does not hold yet
	// (right after a cluster's first election), or that did not answer.
	commandVersionRetry = time.Second
)

// commandVersions is what the promoted leader knows, in one Raft term, of
// the highest command version each member applies, and the minimum over
// the configuration it decided last. Safe for concurrent use; the zero
// value knows nothing and allows nothing new.
type commandVersions struct {
	mu    sync.Mutex
	term  uint64          // the term of known; reset sets it
	known map[string]byte // member id → the version it said it applies, in term
	// decided is the minimum decided last in term (0: a member unknown,
	// or no decision yet). The renewal path reads it without mu.
	decided atomic.Uint32
}

// reset starts term with nothing known and nothing decided: called on
// every leader event, before a new leader serves, so that no decision of
// an earlier term, made for another configuration, is used in this one.
func (c *commandVersions) reset(term uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.term, c.known = term, nil
	c.decided.Store(0)
}

// record notes that member id said, in term, that it applies command
// versions up to v. An answer of another term than the current one is
// dropped.
func (c *commandVersions) record(term uint64, id string, v byte) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term != term {
		return
	}
	if c.known == nil {
		c.known = map[string]byte{}
	}
	c.known[id] = v
}

// decide sets the cluster command version of term to minCommandVersion of
// members and returns it; for another term than the current one it
// changes nothing and returns 0.
func (c *commandVersions) decide(term uint64, members []core.Member) byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.term != term {
		return 0
	}
	v := minCommandVersion(members, c.known)
	c.decided.Store(uint32(v))
	return v
}

// allows reports whether every member of the configuration is known to
// apply entries of command version v (the last decision is v or more).
func (c *commandVersions) allows(v byte) bool { return c.decided.Load() >= uint32(v) }

// Version returns the last decided cluster command version (0: unknown,
// or this node is not the leader).
func (c *commandVersions) Version() byte { return byte(c.decided.Load()) }

// minCommandVersion returns the minimum, over members, of the version each
// said it applies in known; 0 when a member is missing from known (not
// asked yet, or never answered) or members is empty. Voters and non-voters
// alike count: a learner replays every entry too. Answers of ids that are
// not in members (removed since) count for nothing.
func minCommandVersion(members []core.Member, known map[string]byte) byte {
	if len(members) == 0 {
		return 0
	}
	out := byte(math.MaxUint8)
	for _, m := range members {
		v, ok := known[m.ID]
		if !ok {
			return 0
		}
		out = min(out, v)
	}
	return out
}

// commandVersionOf is the highest command version a member's Status says
// it applies; 0 from a binary that predates the field.
func commandVersionOf(st *ticketv1.StatusResponse) byte {
	return byte(min(st.GetMaxCommandVersion(), math.MaxUint8))
}

// watchCommandVersions runs once per promotion, for the Raft term term:
// it asks the members for their command versions at once and then every
// commandVersionInterval (commandVersionRetry while a member is unknown),
// for as long as this node leads term. Other members are not asked when
// their answers could not be believed (a plaintext API with authorization
// on: trustPeerAnswers; there the probe would carry no credential either):
// they stay unknown, and renewals go one entry each.
func (n *Node) watchCommandVersions(term uint64) {
	defer n.bg.Done()
	b := n.backend()
	if b == nil {
		return
	}
	ask := n.trustPeerAnswers()
	if !ask && len(b.Status().Members) > 1 {
		n.log.Info("members' command versions not asked: the client API is plaintext with authorization on, so their answers cannot be authenticated; renewals are written one entry each")
	}
	for n.stillLeader(term) {
		wait := commandVersionInterval
		if n.askCommandVersions(term, b.Status().Members, ask) == 0 && ask {
			wait = commandVersionRetry
		}
		if !n.pause(wait) {
			return
		}
	}
}

// askCommandVersions asks every member of members (the others only when
// ask), in parallel, for the highest command version it applies (its
// Status, at the API address the member directory records, answered as
// that member: probeMember), then decides the cluster command version of
// term over members and returns it (0: a member unknown). This node counts
// with what it publishes itself. A member whose API address is not
// recorded yet, or that does not answer, keeps what it said before in this
// term, if anything.
func (n *Node) askCommandVersions(term uint64, members []core.Member, ask bool) byte {
	ctx, cancel := context.WithTimeout(n.life, probeTimeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, m := range members {
		if m.ID == n.cfg.ID {
			n.versions.record(term, m.ID, n.commandVersion)
			continue
		}
		addr, _ := n.sm.MemberAPIAddr(m.ID)
		if !ask || addr == "" {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			st, err := n.probeMember(ctx, m.ID, addr)
			if err != nil {
				n.log.Debug("command version of a member not known", zap.String("member", m.ID), zap.Error(err))
				return
			}
			n.versions.record(term, m.ID, commandVersionOf(st))
		}()
	}
	wg.Wait()
	before := n.versions.Version()
	v := n.versions.decide(term, members)
	if v != before {
		n.log.Info("cluster command version decided", zap.Uint64("term", term), zap.Uint8("version", v),
			zap.Bool("renew_batches", v >= core.CommandVersion4))
	}
	return v
}

// admitCommandVersion is AddMember's check of the command version the new
// member says it applies (v, from its Status): it refuses, with
// ErrUnsafeMembership, a member below this leader's own, since entries of
// this leader's version may already be in the log it would replay (see
// above); otherwise it records v for this term's decisions.
func (n *Node) admitCommandVersion(id string, v byte) error {
	if v < n.commandVersion {
		return fmt.Errorf("%w: member %q applies command versions up to %d, this leader up to %d: the log may already hold entries it would stop on "+
			"(a RenewBatch is version %d); start it with this leader's release or a newer one (docs/operations.md#upgrades)",
			ErrUnsafeMembership, id, v, n.commandVersion, core.CommandVersion4)
	}
	if term, ok := n.role.promotedTerm(); ok {
		n.versions.record(term, id, v)
	}
	return nil
}
