package server_test

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
)

// versionRounds bounds waits that take rounds of the leader's command
// version checks (every 5 s) and a node's restart, on a busy machine.
const versionRounds = 60 * time.Second

// fakeMember is a member's client API as the leader's Status probes see it
// (ClusterService.Status only), answering as id and saying it applies
// command versions up to version: what lies below the leader's cluster
// command version. The real members' answers are tested on a real cluster
// (TestRenewBatchWaitsForEveryMember).
type fakeMember struct {
	ticketv1connect.UnimplementedClusterServiceHandler
	id      string
	addr    string
	version atomic.Uint32
}

func (f *fakeMember) Status(context.Context, *ticketv1.StatusRequest) (*ticketv1.StatusResponse, error) {
	return &ticketv1.StatusResponse{NodeId: f.id, MaxCommandVersion: f.version.Load()}, nil
}

// startFakeMember serves a fakeMember on a loopback port (HTTP/1.1 and h2c,
// as a node's plaintext API), closed by t.Cleanup.
func startFakeMember(t *testing.T, id string, version byte) *fakeMember {
	t.Helper()
	f := &fakeMember{id: id}
	f.version.Store(uint32(version))
	mux := http.NewServeMux()
	mux.Handle(ticketv1connect.NewClusterServiceHandler(f))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Handler: mux, Protocols: &p, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	t.Cleanup(func() { _ = srv.Close() })
	f.addr = ln.Addr().String()
	return f
}

// addMember asks in to add f as a voter.
func addMember(ctx context.Context, in *nodetest.Instance, f *fakeMember) error {
	_, err := in.Cluster.AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{
		Id: f.id, RaftAddr: "127.0.0.1:1", ApiAddr: f.addr, Voter: true}})
	return err
}

// TestRenewalsOneEntryEachBelowVersion4: a leader whose configuration has
// a member that applies command versions only up to 3 (here the leader
// itself, as an older binary says) never writes a RenewBatch: with four
// renewal entries in flight, the renewals that arrive are proposed at
// once, each in its own entry, as before renewals shared entries. Status
// publishes the version the node applies.
func TestRenewalsOneEntryEachBelowVersion4(t *testing.T) {
	t.Parallel()
	in, mem := memNodeWith(t, []server.Option{server.WithCommandVersion(core.CommandVersion3)})
	ctx := ctxT(t)
	eventually(t, func() bool { return metric(t, in, "ticketd_cluster_command_version") == 3 }, "the leader's cluster command version")
	st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	assert.Equal(t, uint32(core.CommandVersion3), st.GetMaxCommandVersion())

	sessions, tokens := renewalFixture(ctx, t, in, "old/")

	mem.HoldProposals(true)
	out := make(chan error, len(sessions)+len(tokens))
	for _, id := range sessions {
		go func() {
			_, err := in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
			out <- err
		}()
	}
	for i, tok := range tokens {
		go func() {
			_, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: fmt.Sprintf("old/%d", i), Token: tok})
			out <- err
		}()
	}
	eventually(t, func() bool { return len(mem.Log()) == cap(out) }, "every renewal in an entry of its own, all in flight at once")
	for _, e := range mem.Log() {
		assert.NotEqual(t, core.OpRenewBatch, e.Cmd.Op)
	}
	assert.Zero(t, metric(t, in, "ticketd_renewals_waiting"))

	mem.HoldProposals(false)
	for range cap(out) {
		require.NoError(t, <-out)
	}
	assert.Zero(t, metric(t, in, "ticketd_renewals_batched_total"))
}

// TestRenewalRoundAfterTheGateCloses: renewals that waited to share an
// entry while every member applied version 4 are proposed one entry each
// when, before their turn, a member is found to apply only version 3 (a
// node put back on an older binary): the leader asks the gate again when
// it proposes a round, not only when the round fills. Lock Renews, whose
// proposals wait as long as their clients do (a KeepAlive's is bounded by
// the server's proposal timeout), while the leader's next check comes.
func TestRenewalRoundAfterTheGateCloses(t *testing.T) {
	t.Parallel()
	in, mem := memNode(t)
	ctx, cancel := context.WithTimeout(context.Background(), 2*versionRounds)
	defer cancel()
	member := startFakeMember(t, "n2", core.CommandVersion4)
	require.NoError(t, addMember(ctx, in, member))
	eventuallyWithin(t, versionRounds, func() bool { return metric(t, in, "ticketd_cluster_command_version") == 4 }, "every member applies version 4")

	const waiting = 5
	var tokens []uint64
	for i := range renewalsInFlight + waiting {
		res, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("gate/%d", i), LeaseMs: 300_000})
		require.NoError(t, err)
		tokens = append(tokens, res.GetToken())
	}
	mem.HoldProposals(true)
	out := make(chan error, len(tokens))
	renew := func(i int) {
		_, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: fmt.Sprintf("gate/%d", i), Token: tokens[i]})
		out <- err
	}
	for i := range renewalsInFlight {
		go renew(i)
	}
	eventually(t, func() bool { return len(mem.Log()) == renewalsInFlight }, "the first Renews in flight")
	for i := renewalsInFlight; i < len(tokens); i++ {
		go renew(i)
	}
	eventually(t, func() bool { return metric(t, in, "ticketd_renewals_waiting") == waiting }, "the others waiting to share an entry")

	member.version.Store(uint32(core.CommandVersion3))
	eventuallyWithin(t, versionRounds, func() bool { return metric(t, in, "ticketd_cluster_command_version") == 3 }, "the leader sees the member's version 3")
	mem.Commit(1)
	mem.Apply(1)
	eventually(t, func() bool { return len(mem.Log()) == renewalsInFlight-1+waiting }, "the waiting round proposed one entry each")
	for _, e := range mem.Log() {
		assert.NotEqual(t, core.OpRenewBatch, e.Cmd.Op)
	}
	mem.HoldProposals(false)
	for range cap(out) {
		require.NoError(t, <-out)
	}
	assert.Zero(t, metric(t, in, "ticketd_renewals_batched_total"))
}

// TestAddMemberRefusesOlderCommandVersion: the leader refuses, with
// FailedPrecondition and nothing changed, a member whose Status says it
// applies fewer command versions than the leader (3), or does not say (an
// older binary): it could stop on an entry already in the log. A member
// of this release is added.
func TestAddMemberRefusesOlderCommandVersion(t *testing.T) {
	t.Parallel()
	in, _ := memNode(t)
	ctx := ctxT(t)
	for _, v := range []byte{0, core.CommandVersion3} {
		member := startFakeMember(t, "n2", v)
		err := addMember(ctx, in, member)
		require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "version %d: %v", v, err)
		assert.Contains(t, err.Error(), fmt.Sprintf("applies command versions up to %d", v))
		st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
		require.NoError(t, err)
		assert.Len(t, st.GetMembers(), 1, "version %d: not added", v)
	}
	require.NoError(t, addMember(ctx, in, startFakeMember(t, "n2", core.MaxCommandVersion)))
	st, err := in.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	assert.Len(t, st.GetMembers(), 2)
}

// countBatches counts, on one node, the RenewBatch entries it applies
// (the entries a node of an older binary would stop on).
func countBatches(n *atomic.Int64) server.Option {
	return server.WithBackendConfig(func(c *backends.Config) {
		apply := c.OnApply
		c.OnApply = func(index uint64, cmd core.Command, res core.Result) {
			if cmd.Op == core.OpRenewBatch {
				n.Add(1)
			}
			apply(index, cmd, res)
		}
	})
}

// renewalLoad keeps 12 sessions alive and renews 12 locks on in from 24
// clients at once until stop, asked after every call with the number of
// calls so far, says so; any failed call fails the test.
func renewalLoad(t *testing.T, ctx context.Context, in *nodetest.Instance, prefix string, stop func(calls int64) bool) {
	t.Helper()
	const clients = 12
	var sessions, tokens []uint64
	for i := range clients {
		s, err := in.Lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 30_000})
		require.NoError(t, err)
		sessions = append(sessions, s.GetSession())
		res, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("%s/%d", prefix, i), LeaseMs: 30_000})
		require.NoError(t, err)
		tokens = append(tokens, res.GetToken())
	}
	var (
		calls atomic.Int64
		done  atomic.Bool
		wg    sync.WaitGroup
	)
	errs := make(chan error, 2*clients)
	loop := func(call func() error) {
		defer wg.Done()
		for !done.Load() {
			if err := call(); err != nil {
				errs <- err
				done.Store(true)
				return
			}
			if stop(calls.Add(1)) {
				done.Store(true)
			}
		}
	}
	for i := range clients {
		wg.Add(2)
		go loop(func() error {
			_, err := in.Lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: sessions[i]})
			return err
		})
		go loop(func() error {
			_, err := in.Lock.Renew(ctx, &ticketv1.RenewRequest{Key: fmt.Sprintf("%s/%d", prefix, i), Token: tokens[i]})
			return err
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("renewal on %s: %v", in.ID, err)
	}
}

// TestRenewBatchWaitsForEveryMember: a real three-node cluster of each
// backend in a rolling upgrade, with one node still saying it applies command versions
// only up to 3 (an older binary). Under a renewal load that makes the
// leader write RenewBatch entries on an upgraded cluster
// (TestRenewBatchOnCluster), no node applies one; once that node is
// restarted on the current version, the leader's next check sees it, and
// batches are written and applied on every node, that one included.
func TestRenewBatchWaitsForEveryMember(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("three-node cluster")
	}
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) { renewBatchWaitsForEveryMember(t, backend) })
	}
}

func renewBatchWaitsForEveryMember(t *testing.T, backend string) {
	const old = 2
	var batches [3]atomic.Int64
	options := func(i int) []server.Option { return []server.Option{countBatches(&batches[i])} }
	// One leader for the whole load (every renewal goes to it and must
	// succeed), as in TestRenewBatchOnCluster.
	c := nodetest.Start(t, 3, nodetest.WithBackend(backend), nodetest.WithConfig(func(_ int, c *config.Config) {
		c.Raft.HeartbeatMS, c.Raft.ElectionTimeoutMS = 200, 5000
	}), nodetest.WithServerOptions(func(i int) []server.Option {
		if i == old {
			return append(options(i), server.WithCommandVersion(core.CommandVersion3))
		}
		return options(i)
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 4*versionRounds)
	defer cancel()

	leader := c.Leader(t)
	eventuallyWithin(t, versionRounds, func() bool { return metric(t, leader, "ticketd_cluster_command_version") == 3 },
		"the leader has every member's version, 3 at least")
	renewalLoad(t, ctx, leader, "before", func(calls int64) bool { return calls >= 3000 })
	assert.Equal(t, float64(3), metric(t, leader, "ticketd_cluster_command_version"))
	assert.Zero(t, metric(t, leader, "ticketd_renewals_batched_total"))
	commit, err := leader.Cluster.Status(ctx, &ticketv1.StatusRequest{})
	require.NoError(t, err)
	eventually(t, func() bool {
		st, err := c.Nodes[old].Cluster.Status(ctx, &ticketv1.StatusRequest{})
		return err == nil && st.GetAppliedIndex() >= commit.GetCommitIndex()
	}, "the older node applied the whole load")
	for i := range batches {
		assert.Zero(t, batches[i].Load(), "RenewBatch entries applied on %s", c.Nodes[i].ID)
	}

	// The rolling upgrade's last step: the older node restarts on this release.
	c.Stop(old)
	c.Nodes[old].Options = options(old)
	c.Restart(t, old)
	eventuallyWithin(t, versionRounds, func() bool { return metric(t, c.Leader(t), "ticketd_cluster_command_version") == 4 },
		"the leader sees every member apply version 4")
	leader = c.Leader(t)
	applied := func() bool {
		for i := range batches {
			if batches[i].Load() == 0 {
				return false
			}
		}
		return true
	}
	renewalLoad(t, ctx, leader, "after", func(calls int64) bool { return applied() || calls >= 200_000 })
	eventually(t, applied, "RenewBatch entries applied on every node")
	assert.Positive(t, metric(t, leader, "ticketd_renewals_batched_total"))
}

// TestJoinOfAnOlderBinaryRefused: on a real cluster of each backend, a new
// node that says it applies command versions only up to 3 asks to join
// (config join): the leader refuses it with FailedPrecondition and the
// reason, and it stays out of the configuration; restarted on this
// release, it joins.
func TestJoinOfAnOlderBinaryRefused(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("four-node cluster")
	}
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) { joinOfAnOlderBinaryRefused(t, backend) })
	}
}

func joinOfAnOlderBinaryRefused(t *testing.T, backend string) {
	const joiner = 3
	c := nodetest.Start(t, 3, nodetest.WithBackend(backend), nodetest.WithServerOptions(func(i int) []server.Option {
		if i == joiner {
			return []server.Option{server.WithCommandVersion(core.CommandVersion3)}
		}
		return nil
	}))
	ctx, cancel := context.WithTimeout(context.Background(), 2*versionRounds)
	defer cancel()
	require.Equal(t, joiner, c.Join(t, 0))
	in := c.Nodes[joiner]
	// Asked through a founding node (which forwards to the leader): the
	// joiner, in no configuration, knows no leader, so nodetest's
	// Leader, which waits for every running node to agree, is not used.
	member := &ticketv1.Member{Id: in.ID, RaftAddr: in.Config.RaftAddr, ApiAddr: in.Addr, Voter: true}
	var err error
	eventuallyWithin(t, versionRounds, func() bool {
		_, err = c.Nodes[0].Cluster.AddMember(ctx, &ticketv1.AddMemberRequest{Member: member})
		return connect.CodeOf(err) != connect.CodeUnavailable // an election under way: ask again
	}, "an answer from the leader")
	require.Equal(t, connect.CodeFailedPrecondition, connect.CodeOf(err), "%v", err)
	assert.Contains(t, err.Error(), fmt.Sprintf("%q applies command versions up to 3", in.ID))
	members := func() int {
		st, err := c.Nodes[0].Cluster.Status(ctx, &ticketv1.StatusRequest{})
		require.NoError(t, err)
		return len(st.GetMembers())
	}
	assert.Equal(t, 3, members(), "its own join requests are refused too")

	c.Stop(joiner)
	in.Options = nil
	c.Restart(t, joiner)
	eventuallyWithin(t, versionRounds, func() bool { return members() == 4 }, "the node on this release joins")
}
