package server_test

import (
	"testing"

	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
	"github.com/ticketd/ticketd/server/snapfile"
)

// TestSnapshotStreamsInChunks: a snapshot of several MiB comes as chunks of
// at most 1 MiB, the header in the first only, and the bytes verify against
// it (size, SHA-256, and core accepts them with its index and last token).
func TestSnapshotStreamsInChunks(t *testing.T) {
	t.Parallel()
	const locks = 100_000
	h, data := lockSnapshot(t, locks)
	require.Greater(t, len(data), 2<<20, "several chunks")
	c := nodetest.Start(t, 1,
		nodetest.WithPrepare(func(_ int, cfg config.Config) error { return server.Restore(cfg, h, data, nil) }))
	in := c.Leader(t)
	stream, err := in.Cluster.Snapshot(ctxT(t), &ticketv1.SnapshotRequest{})
	require.NoError(t, err)
	defer func() { _ = stream.Close() }()
	var got *ticketv1.SnapshotHeader
	var body []byte
	chunks := 0
	for stream.Receive() {
		m := stream.Msg()
		if chunks == 0 {
			got = m.GetHeader()
			require.NotNil(t, got, "the first chunk carries the header")
		} else {
			require.Nil(t, m.GetHeader(), "chunk %d", chunks)
		}
		require.LessOrEqual(t, len(m.GetData()), 1<<20)
		body = append(body, m.GetData()...)
		chunks++
	}
	require.NoError(t, stream.Err())
	require.Greater(t, chunks, 2)
	require.NoError(t, snapfile.Verify(got, body))
	require.Equal(t, int64(locks), got.GetLocksHeld())
	require.Equal(t, in.ID, got.GetNodeId())
	require.Equal(t, config.BackendHashicorp, got.GetBackend())
}
