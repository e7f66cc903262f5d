package backendcluster_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/backends/hashicorp"
	"github.com/ticketd/ticketd/core"

	"github.com/ticketd/ticketd/bench/backendcluster"
)

var constructors = map[string]backendcluster.NewFunc{
	"hashicorp": backendcluster.NewFuncOf(hashicorp.New),
	"etcd":      backendcluster.NewFuncOf(etcd.New),
}

func TestStartProposeClose(t *testing.T) {
	for _, name := range []string{"hashicorp", "etcd"} {
		t.Run(name, func(t *testing.T) {
			dir := filepath.Join(t.TempDir(), "cluster")
			c, err := backendcluster.Start(context.Background(), backendcluster.Config{New: constructors[name], Dir: dir})
			require.NoError(t, err)
			require.Len(t, c.Nodes(), backendcluster.Size)

			leader := c.Leader()
			require.NotNil(t, leader)
			st := leader.Status()
			require.Len(t, st.Members, backendcluster.Size)
			for _, m := range st.Members {
				require.Contains(t, m.RaftAddr, "127.0.0.1:")
			}
			res, err := leader.Propose(context.Background(), core.Grant("k", 1000, "me"))
			require.NoError(t, err)
			require.Equal(t, core.OutcomeGranted, res.Outcome)
			for _, m := range st.Members {
				require.DirExists(t, filepath.Join(dir, m.ID), "each node keeps its data in its own directory")
			}

			require.NoError(t, c.Close())
			_, err = os.Stat(dir)
			require.ErrorIs(t, err, os.ErrNotExist, "Close removes the data")
		})
	}
}

func TestStartFails(t *testing.T) {
	boom := errors.New("boom")
	calls := 0
	failSecond := func(cfg backends.Config) (core.Consensus, error) {
		calls++
		if calls == 2 {
			return nil, boom
		}
		return constructors["hashicorp"](cfg)
	}
	dir := filepath.Join(t.TempDir(), "cluster")
	_, err := backendcluster.Start(context.Background(), backendcluster.Config{New: failSecond, Dir: dir})
	require.ErrorIs(t, err, boom)
	_, err = os.Stat(dir)
	require.ErrorIs(t, err, os.ErrNotExist, "a failed start cleans up")
}

func TestStartInvalidConfig(t *testing.T) {
	_, err := backendcluster.Start(context.Background(), backendcluster.Config{Dir: t.TempDir()})
	require.ErrorIs(t, err, backendcluster.ErrInvalidConfig)
	_, err = backendcluster.Start(context.Background(), backendcluster.Config{New: constructors["etcd"]})
	require.ErrorIs(t, err, backendcluster.ErrInvalidConfig)
}

// TestNewFuncOfError checks that a failed constructor gives a nil interface,
// not a typed nil *hashicorp.Node that callers would take for a node.
func TestNewFuncOfError(t *testing.T) {
	n, err := constructors["hashicorp"](backends.Config{})
	require.Error(t, err)
	require.True(t, n == nil, "got %T(%v)", n, n)
}
