package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	ticketdbackends "github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/snapfile"
)

// heldLocks acquires n locks on the leader (long leases) and returns their
// tokens by key.
func heldLocks(t *testing.T, c *ticketdtest.Cluster, prefix string, n int) map[string]uint64 {
	t.Helper()
	ctx := ctxT(t)
	out := map[string]uint64{}
	for i := range n {
		key := fmt.Sprintf("%s/%d", prefix, i)
		res, err := c.Lock(c.Leader(t)).Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 120_000, Owner: "o-" + key})
		require.NoError(t, err)
		out[key] = res.GetToken()
	}
	return out
}

// requireSurvived checks that every lock of held is held with its token on
// the cluster's leader, that the token counter is where it was, and that
// the next grant gets a larger token than any issued before.
func requireSurvived(t *testing.T, c *ticketdtest.Cluster, held map[string]uint64, lastToken uint64) {
	t.Helper()
	ctx := ctxT(t)
	l := c.Leader(t)
	for key, tok := range held {
		res, err := c.Lock(l).GetLock(ctx, &ticketv1.GetLockRequest{Key: key})
		require.NoError(t, err)
		require.True(t, res.GetHeld(), "%s not held after recovery", key)
		require.Equal(t, tok, res.GetToken(), "%s token after recovery", key)
	}
	st, err := c.Status(l)
	require.NoError(t, err)
	require.Equal(t, lastToken, st.GetLastToken(), "last token after recovery")
	// A key of its own per recovery, so a test may recover a cluster twice.
	res, err := c.Lock(l).Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("after-recovery-%d", lastToken), LeaseMs: 60_000})
	require.NoError(t, err)
	require.Greater(t, res.GetToken(), lastToken, "a token was reissued")
}

// withoutServe returns serve's arguments without the leading "serve".
func withoutServe(args []string) []string {
	if len(args) > 0 && args[0] == "serve" {
		return args[1:]
	}
	return args
}

// replaceBootstrap returns args with "--bootstrap X" replaced by repl.
func replaceBootstrap(args []string, repl ...string) []string {
	i := slices.Index(args, "--bootstrap")
	if i < 0 {
		return append(args, repl...)
	}
	return slices.Concat(args[:i], repl, args[i+2:])
}

// TestRestoreFromSnapshot backs the lock table up through
// ClusterService.Snapshot (from a follower: forwarded to the leader), loses
// every node's data, runs `ticketd restore` on each member from the one
// file, and starts the cluster again: every lock and the token counter
// survive, and the next token is larger than any issued before
// (docs/design.md#storage-and-recovery).
func TestRestoreFromSnapshot(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		held := heldLocks(t, c, "restore", 5)
		st, err := c.Status(c.Leader(t))
		require.NoError(t, err)

		cl, err := sdk.New([]string{c.Node(follower(t, c)).APIAddr})
		require.NoError(t, err)
		defer cl.Close()
		h, data, err := cl.Snapshot(ctxT(t))
		require.NoError(t, err)
		require.NoError(t, snapfile.Verify(h, data))
		require.Equal(t, st.GetLastToken(), h.GetLastToken())
		require.Equal(t, backend, h.GetBackend())
		file := filepath.Join(t.TempDir(), "backup.snap")
		f, err := os.Create(file)
		require.NoError(t, err)
		require.NoError(t, snapfile.WriteHeader(f, h))
		_, err = f.Write(data)
		require.NoError(t, err)
		require.NoError(t, f.Close())

		for i := range c.Len() {
			c.Kill(i)
			require.NoError(t, os.RemoveAll(c.Node(i).DataDir))
		}
		bin := ticketdtest.Binary(t)
		for i := range c.Len() {
			args := slices.Concat([]string{"restore", "--snapshot", file}, withoutServe(c.Args(i)))
			out, err := exec.Command(bin, args...).CombinedOutput()
			require.NoError(t, err, "ticketd restore: %s", out)
		}
		// A second restore into a restored dir is refused.
		out, err := exec.Command(bin, slices.Concat([]string{"restore", "--snapshot", file}, withoutServe(c.Args(0)))...).CombinedOutput()
		require.Error(t, err, "restore over existing data: %s", out)
		require.Contains(t, string(out), "already holds raft state")
		for i := range c.Len() {
			c.Restart(i)
		}
		requireSurvived(t, c, held, st.GetLastToken())
	})
}

// TestForceNewCluster loses two of three nodes' data (kill -9, data dirs
// removed), starts the third with --force-new-cluster as a one-member
// cluster, and has a new member join it: every lock and the token counter
// survive, and the next token is larger than any issued before
// (docs/design.md#storage-and-recovery).
func TestForceNewCluster(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c := start(t, backend)
		held := heldLocks(t, c, "force", 5)
		l := c.Leader(t)
		st, err := c.Status(l)
		require.NoError(t, err)
		// The survivor must have applied every acknowledged command: pick
		// node 0 and wait for it (an operator picks the most up-to-date).
		eventually(t, func() bool {
			s, err := c.Status(0)
			return err == nil && s.GetAppliedIndex() >= st.GetCommitIndex()
		}, "n1 applies everything")
		for i := range c.Len() {
			c.Kill(i)
		}
		for i := 1; i < c.Len(); i++ {
			require.NoError(t, os.RemoveAll(c.Node(i).DataDir))
		}
		c.StartArgs(0, append(c.Args(0), "--force-new-cluster"))
		eventually(t, func() bool {
			s, err := c.Status(0)
			return err == nil && s.GetLeaderId() == c.Node(0).ID && len(s.GetMembers()) == 1
		}, "n1 leads a one-member cluster")
		requireSurvived(t, c, held, st.GetLastToken())

		// A new member (n2, empty data) joins through n1.
		c.StartArgs(1, replaceBootstrap(c.Args(1), "--join", c.Node(0).APIAddr))
		eventually(t, func() bool {
			s0, err0 := c.Status(0)
			s1, err1 := c.Status(1)
			return err0 == nil && err1 == nil && len(s0.GetMembers()) == 2 &&
				s1.GetLastToken() == s0.GetLastToken() && s1.GetAppliedIndex() >= s0.GetCommitIndex()
		}, "n2 joins and catches up")
		ctx, cancel := context.WithTimeout(context.Background(), safety)
		defer cancel()
		res, err := c.Lock(1).Acquire(ctx, &ticketv1.AcquireRequest{Key: "via-n2", LeaseMs: 60_000})
		require.NoError(t, err)
		require.Greater(t, res.GetToken(), st.GetLastToken()+1)
	})
}

// withBackend returns args with "--backend X" replaced by "--backend b".
func withBackend(args []string, b string) []string { return withFlag(args, "--backend", b) }

// withFlag returns args with "flag X" replaced by "flag v", or with
// "flag v" added when args has no flag.
func withFlag(args []string, flag, v string) []string {
	args = slices.Clone(args)
	i := slices.Index(args, flag)
	if i < 0 || i+1 >= len(args) {
		return append(args, flag, v)
	}
	args[i+1] = v
	return args
}

// TestRestoreAcrossBackends saves a snapshot with `ticketctl snapshot save`
// from a cluster of one backend, loses every node's data, runs `ticketd
// restore` with the other backend on each member, and starts the cluster
// on that backend: every lock and the token counter survive and the next
// token is larger than any issued before. The snapshot file holds the core
// lock table (backend-neutral bytes; the header's backend is informative),
// so a cluster can change its consensus engine this way (docs/operations.md#backup-and-restore).
func TestRestoreAcrossBackends(t *testing.T) {
	t.Parallel() // its directions' clusters are its own: beside the others (see matrix)
	for _, tc := range []struct{ from, to string }{
		{from: "hashicorp", to: "etcd"},
		{from: "etcd", to: "hashicorp"},
	} {
		t.Run(tc.from+"_to_"+tc.to, func(t *testing.T) {
			t.Parallel() // its own cluster: beside the other direction (see matrix)
			if bs := backends(); !slices.Contains(bs, tc.from) || !slices.Contains(bs, tc.to) {
				t.Skipf("needs both backends, testing %v", bs)
			}
			c := start(t, tc.from)
			held := heldLocks(t, c, "across", 5)
			st, err := c.Status(c.Leader(t))
			require.NoError(t, err)

			file := filepath.Join(t.TempDir(), "backup.snap")
			cmd, stdout, stderr := ctlCmd(t, c, "snapshot", "save", file)
			require.NoError(t, cmd.Run(), "ticketctl snapshot save: %s%s", stdout, stderr)
			h, _, err := snapfile.Read(mustOpen(t, file), 64<<20)
			require.NoError(t, err)
			require.Equal(t, tc.from, h.GetBackend())
			require.Equal(t, st.GetLastToken(), h.GetLastToken())

			for i := range c.Len() {
				c.Kill(i)
				require.NoError(t, os.RemoveAll(c.Node(i).DataDir))
			}
			bin := ticketdtest.Binary(t)
			for i := range c.Len() {
				args := slices.Concat([]string{"restore", "--snapshot", file}, withBackend(withoutServe(c.Args(i)), tc.to))
				out, err := exec.Command(bin, args...).CombinedOutput()
				require.NoError(t, err, "ticketd restore --backend %s: %s", tc.to, out)
			}
			for i := range c.Len() {
				c.StartArgs(i, withBackend(c.Args(i), tc.to))
			}
			requireSurvived(t, c, held, st.GetLastToken())
			after, err := c.Status(c.Leader(t))
			require.NoError(t, err)
			require.Equal(t, tc.to, after.GetBackend(), "the restored cluster runs the other backend")
		})
	}
}

// mustOpen opens path for reading, closed when the test ends.
func mustOpen(t *testing.T, path string) *os.File {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	t.Cleanup(func() { _ = f.Close() })
	return f
}

// TestRestoreAcrossLogStores moves a cluster of each backend from the
// default wal log store to the badger store and back with `ticketctl
// snapshot save` and `ticketd restore --raft-log-store` (docs/operations.md,
// Raft log stores): every lock and the token counter survive each move, a
// node started with the store its data dir was not written by is refused,
// and a node started without --raft-log-store opens the store its data dir
// records (a badger data dir stays badger under the wal default).
func TestRestoreAcrossLogStores(t *testing.T) {
	matrix(t, testRestoreAcrossLogStores)
}

func testRestoreAcrossLogStores(t *testing.T, backend string) {
	c := start(t, backend)
	bin := ticketdtest.Binary(t)
	got, err := ticketdbackends.ReadLogStore(c.Node(0).DataDir)
	require.NoError(t, err)
	require.Equal(t, ticketdbackends.DefaultLogStore, got, "a new data dir gets the default store")
	require.Equal(t, "wal", got)
	for round, store := range []string{"badger", "wal"} {
		held := heldLocks(t, c, fmt.Sprintf("store-%d", round), 5)
		st, err := c.Status(c.Leader(t))
		require.NoError(t, err)
		file := filepath.Join(t.TempDir(), "move.snap")
		cmd, stdout, stderr := ctlCmd(t, c, "snapshot", "save", file)
		require.NoError(t, cmd.Run(), "ticketctl snapshot save: %s%s", stdout, stderr)
		for i := range c.Len() {
			c.Kill(i)
		}
		// The old data dir refuses the new store.
		args := withFlag(c.Args(0), "--raft-log-store", store)
		out, err := exec.CommandContext(ctxT(t), bin, args...).CombinedOutput()
		require.Error(t, err, "ticketd serve --raft-log-store %s on the old data dir started: %s", store, out)
		require.Contains(t, string(out), "refusing to open it with", "refusal: %s", out)
		for i := range c.Len() {
			require.NoError(t, os.RemoveAll(c.Node(i).DataDir))
			args := slices.Concat([]string{"restore", "--snapshot", file}, withFlag(withoutServe(c.Args(i)), "--raft-log-store", store))
			out, err := exec.Command(bin, args...).CombinedOutput()
			require.NoError(t, err, "ticketd restore --raft-log-store %s: %s", store, out)
		}
		// No --raft-log-store: each node opens the store its data dir records.
		for i := range c.Len() {
			c.StartArgs(i, c.Args(i))
		}
		requireSurvived(t, c, held, st.GetLastToken())
		got, err := ticketdbackends.ReadLogStore(c.Node(0).DataDir)
		require.NoError(t, err)
		require.Equal(t, store, got, "the data dir records the new store")
	}
}
