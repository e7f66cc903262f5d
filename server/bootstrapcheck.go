package server

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// This file is the check a node makes before it bootstraps an empty data
// dir from its bootstrap list: that no other listed member knows it as a
// member that already took part in their cluster (etcd refuses the same
// start with "member has already been bootstrapped",
// server/etcdserver/bootstrap.go; docs/design.md#storage-and-recovery).
// A voter whose data dir was wiped and that bootstrapped again would come
// back with an empty log and a term of 1: it would vote for any candidate,
// and a candidate that missed acknowledged writes could win with its vote.

// DefaultBootstrapProbeWait is how long a node about to bootstrap an empty
// data dir waits for the other bootstrap members to answer (WithBootstrapProbeWait).
// Members of a new cluster starting together are all inside this wait, so
// none answers and each bootstraps when it ends: it is what the first start
// of a new cluster costs, once.
const DefaultBootstrapProbeWait = 3 * time.Second

// bootstrapProbeRetry is the pause between two tries of a member that did
// not answer.
const bootstrapProbeRetry = 200 * time.Millisecond

// ErrAlreadyBootstrapped: the node's data dir holds no Raft state, but a
// member of its bootstrap list answered that this node already took part in
// their cluster; it lost its data and must be replaced (removed, then added
// back through join), not bootstrapped again.
var ErrAlreadyBootstrapped = errors.New("member has already been bootstrapped")

// WithBootstrapProbeWait sets how long a node about to bootstrap an empty
// data dir waits for the other bootstrap members to answer before it goes
// ahead (default DefaultBootstrapProbeWait; tests that start nodes one
// after another shorten it). Zero or less skips the check: only for a tool
// that always starts a new cluster in new temporary dirs (a benchmark).
func WithBootstrapProbeWait(d time.Duration) Option {
	return func(o *options) { o.bootstrapWait = d }
}

// checkNotBootstrapped is the backend's BeforeBootstrap hook (the data dir
// holds no Raft state and the bootstrap list is set). It asks every other
// member of the bootstrap list for its Status over the API (the forwarder's
// channel: TLS-verified and with this node's client certificate when TLS is
// on), trying each until it answers as that member or wait has passed, and
// stops waiting once all have answered. The start is refused when an
// answer lists this node in its Raft configuration and either
//   - holds this node's API address in its member directory: a leader
//     records a founding member's address only once that member answered
//     it (ensureMembers), and AddMember records a joiner's, so the cluster
//     exists and this member took part in it; or
//   - has a term above 1 and is still replaying its log when the wait ends
//     (applied index below the commit index it recorded before it
//     stopped): a member restarted with no leader yet applies nothing, so
//     its directory cannot show whether this member took part, and the
//     start cannot be shown safe (such a member is asked again until the
//     wait ends, askEvidence).
//
// Members that do not answer, and answers that show neither, leave the
// start as it was: a new cluster whose members start at different times
// bootstraps, whatever the members already up have done meanwhile.
func (n *Node) checkNotBootstrapped(wait time.Duration) error {
	var others []core.Member
	for _, m := range n.cfg.Members() {
		if m.ID != n.cfg.ID {
			others = append(others, m)
		}
	}
	if len(others) == 0 || wait <= 0 {
		return nil
	}
	ctx, cancel := context.WithTimeout(n.life, wait)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		evidence []string
		silent   []string
	)
	for _, m := range others {
		wg.Add(1)
		go func() {
			defer wg.Done()
			why, err := n.askEvidence(ctx, m)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				silent = append(silent, fmt.Sprintf("%s: %v", m.ID, err))
				return
			}
			if why != "" {
				evidence = append(evidence, fmt.Sprintf("%s (%s)", m.ID, why))
			}
		}()
	}
	wg.Wait()
	if len(evidence) > 0 {
		n.log.Error("data dir holds no raft state but the cluster may know this member; refusing to bootstrap again",
			zap.String("data_dir", n.cfg.DataDir), zap.Strings("answered", evidence))
		return fmt.Errorf("%w: node %q has an empty data dir %s, but its cluster shows it may already have taken part: %s. "+
			"Its data is gone, and bootstrapping again would let it vote with an empty log. Replace it: "+
			"`ticketctl members remove %s` against a running member, then start this node with an empty data dir and "+
			"--join <a member's api addr> instead of --bootstrap (docs/operations.md#replacing-a-member-whose-data-is-gone). "+
			"If this node has never run before, start it again once the other members have a leader",
			ErrAlreadyBootstrapped, n.cfg.ID, n.cfg.DataDir, strings.Join(evidence, "; "), n.cfg.ID)
	}
	n.log.Info("bootstrapping a new cluster: no other bootstrap member knows this one",
		zap.Int("answered", len(others)-len(silent)), zap.Strings("did_not_answer", silent))
	return nil
}

// askEvidence asks member m for its Status (askStatus) and returns what it
// shows (bootstrappedEvidence). An answer that cannot tell because m is
// replaying is asked again until ctx ends, so a member that finishes its
// replay within the wait (it found a leader) is judged by its directory.
func (n *Node) askEvidence(ctx context.Context, m core.Member) (string, error) {
	for {
		st, err := n.askStatus(ctx, m)
		if err != nil {
			return "", err
		}
		why, replaying := bootstrappedEvidence(st, n.cfg.ID)
		if !replaying {
			return why, nil
		}
		select {
		case <-ctx.Done():
			return why, nil
		case <-time.After(bootstrapProbeRetry):
		}
	}
}

// askStatus asks member m's API for its Status until it answers as m or
// ctx ends.
func (n *Node) askStatus(ctx context.Context, m core.Member) (*ticketv1.StatusResponse, error) {
	for {
		st, err := n.fwd.Cluster(m.APIAddr).Status(ctx, &ticketv1.StatusRequest{})
		if err == nil && st.GetNodeId() == m.ID {
			return st, nil
		}
		if err == nil {
			err = fmt.Errorf("api_addr %s answers as %q, not %q", m.APIAddr, st.GetNodeId(), m.ID)
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(bootstrapProbeRetry):
		}
	}
}

// bootstrappedEvidence says why st, one member's Status, shows that member
// id may already have taken part in the cluster (checkNotBootstrapped's
// rule), or "" when it does not; replaying is true when the reason is that
// the member is replaying its log and cannot tell yet.
func bootstrappedEvidence(st *ticketv1.StatusResponse, id string) (why string, replaying bool) {
	for _, m := range st.GetMembers() {
		if m.GetId() != id {
			continue
		}
		if m.GetApiAddr() != "" {
			return fmt.Sprintf("term %d, applied index %d, leader %q: its member directory records %s, which a leader does once it has heard from it",
				st.GetTerm(), st.GetAppliedIndex(), st.GetLeaderId(), id), false
		}
		if st.GetTerm() > 1 && st.GetAppliedIndex() < st.GetReplayTargetIndex() {
			return fmt.Sprintf("term %d, replaying its log: applied index %d of %d, so it cannot tell whether %s took part",
				st.GetTerm(), st.GetAppliedIndex(), st.GetReplayTargetIndex(), id), true
		}
	}
	return "", false
}
