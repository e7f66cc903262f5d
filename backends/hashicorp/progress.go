package hashicorp

import (
	"io"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/ticketd/ticketd/backends"
)

// This file is the leader's record of each follower's lag and last contact,
// reported to a backends.PeerObserver.

// progressInterval is how often a leader reports each follower's lag and
// last contact to a backends.PeerObserver: 200 ms, half the default election
// timeout, so the last-contact age a scrape computes is never more than
// that stale (a report is one map write).
const progressInterval = 200 * time.Millisecond

// peerProgress is what the leader last heard from one follower.
type peerProgress struct {
	contact time.Time // last response of any kind
	lastLog uint64    // the follower's last log index, as it last said
	term    uint64    // term of the request answered
}

// progressTransport decorates the node's raft.Transport to learn, from the
// responses to the leader's AppendEntries (hashicorp's heartbeats, sent
// about every HeartbeatTimeout/10 to each follower, and non-pipelined
// replication) and InstallSnapshot, when each follower last answered and
// its last log index: hashicorp/raft keeps its followerReplication private.
// The pipelined AppendEntries path (replication's hot path) is not
// decorated: observing its responses would put a relay goroutine between
// every response and commit; the heartbeats refresh lag and contact often
// enough for a once-a-second report. Safe for concurrent use.
type progressTransport struct {
	raft.Transport
	preVote raft.WithPreVote

	mu    sync.Mutex
	peers map[raft.ServerID]peerProgress
}

var (
	_ raft.Transport   = (*progressTransport)(nil)
	_ raft.WithPreVote = (*progressTransport)(nil)
	_ raft.WithClose   = (*progressTransport)(nil)
)

// trackProgress returns trans decorated by a progressTransport when
// Config.Observer is a backends.PeerObserver, and trans itself otherwise
// (or when trans lacks pre-vote support, which the decorator must not
// claim for it).
func (n *Node) trackProgress(trans raft.Transport) raft.Transport {
	if _, ok := n.cfg.Observer.(backends.PeerObserver); !ok {
		return trans
	}
	pv, ok := trans.(raft.WithPreVote)
	if !ok {
		return trans
	}
	n.progress = &progressTransport{Transport: trans, preVote: pv, peers: map[raft.ServerID]peerProgress{}}
	return n.progress
}

// note records a response from id to a request of term; lastLog is the
// follower's last index as far as the response tells (0: it does not).
// Within one term the largest lastLog is kept (responses may overtake each
// other); the first response of a new term replaces it, as a new leader
// may have made the follower truncate a divergent tail.
func (t *progressTransport) note(id raft.ServerID, term, lastLog uint64) {
	now := time.Now()
	t.mu.Lock()
	p := t.peers[id]
	if p.term != term {
		p = peerProgress{term: term, lastLog: lastLog}
	}
	p.contact = now
	p.lastLog = max(p.lastLog, lastLog)
	t.peers[id] = p
	t.mu.Unlock()
}

// AppendEntries implements raft.Transport: a response's LastLog is the
// follower's last index before it handled the request; after a successful
// append it also holds the request's entries.
func (t *progressTransport) AppendEntries(id raft.ServerID, target raft.ServerAddress, args *raft.AppendEntriesRequest, resp *raft.AppendEntriesResponse) error {
	if err := t.Transport.AppendEntries(id, target, args, resp); err != nil {
		return err
	}
	last := resp.LastLog
	if resp.Success && len(args.Entries) > 0 {
		last = max(last, args.Entries[len(args.Entries)-1].Index)
	}
	t.note(id, args.Term, last)
	return nil
}

// InstallSnapshot implements raft.Transport: a successful install leaves
// the follower at the snapshot's index.
func (t *progressTransport) InstallSnapshot(id raft.ServerID, target raft.ServerAddress, args *raft.InstallSnapshotRequest, resp *raft.InstallSnapshotResponse, data io.Reader) error {
	if err := t.Transport.InstallSnapshot(id, target, args, resp, data); err != nil {
		return err
	}
	var last uint64
	if resp.Success {
		last = args.LastLogIndex
	}
	t.note(id, args.Term, last)
	return nil
}

// RequestPreVote implements raft.WithPreVote by the decorated transport.
func (t *progressTransport) RequestPreVote(id raft.ServerID, target raft.ServerAddress, args *raft.RequestPreVoteRequest, resp *raft.RequestPreVoteResponse) error {
	return t.preVote.RequestPreVote(id, target, args, resp)
}

// Close implements raft.WithClose by the decorated transport.
func (t *progressTransport) Close() error {
	if c, ok := t.Transport.(raft.WithClose); ok {
		return c.Close()
	}
	return nil
}

// get returns what the leader heard from id: its last log index as last
// said (in any term), and the time of its last response in term (zero
// when none).
func (t *progressTransport) get(id raft.ServerID, term uint64) (lastLog uint64, contact time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	p := t.peers[id]
	if p.term == term {
		contact = p.contact
	}
	return p.lastLog, contact
}

// runProgress reports each follower's lag (raft.LastIndex minus the
// follower's last log index) and last contact (zero time: no response in
// this term yet) to the PeerObserver once per progressInterval while this
// node leads, until Close. Started by startProgress.
func (n *Node) runProgress() {
	defer n.wg.Done()
	po, ok := n.cfg.Observer.(backends.PeerObserver)
	if !ok {
		return
	}
	tick := time.NewTicker(progressInterval)
	defer tick.Stop()
	for {
		select {
		case <-n.stopCh:
			return
		case <-tick.C:
		}
		if n.raft.State() != raft.Leader {
			continue
		}
		term, last := n.raft.CurrentTerm(), n.raft.LastIndex()
		cf := n.raft.GetConfiguration()
		if cf.Error() != nil {
			continue
		}
		for _, s := range cf.Configuration().Servers {
			if string(s.ID) == n.cfg.ID {
				continue
			}
			lastLog, contact := n.progress.get(s.ID, term)
			var lag uint64
			if last > lastLog {
				lag = last - lastLog
			}
			po.FollowerProgress(string(s.ID), lag, contact)
		}
	}
}

// startProgress starts runProgress when trackProgress decorated the
// transport; otherwise it does nothing.
func (n *Node) startProgress() {
	if n.progress == nil {
		return
	}
	n.wg.Add(1)
	go n.runProgress()
}
