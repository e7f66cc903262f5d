package sdk

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// Snapshot fetches a consistent snapshot of the lock table from the leader
// (ClusterService.Snapshot; etcd's Maintenance.Snapshot): its header
// (backend, index, term, last token, SHA-256 of the data) and the snapshot
// bytes, which `ticketd restore` turns into a new cluster. The whole stream
// is read in one attempt, and a failed attempt is retried from the start
// (it changes nothing). The checksum is not verified here (the server's
// snapfile package does that).
//
// Errors: the server's (PermissionDenied without the admin permission once
// authorization is on), or the ctx error wrapping the last failure (often
// ErrUnavailable).
func (c *Client) Snapshot(ctx context.Context) (*ticketv1.SnapshotHeader, []byte, error) {
	type result struct {
		h    *ticketv1.SnapshotHeader
		data []byte
	}
	spec := callSpec{op: "snapshot", toLeader: true}
	res, _, err := invoke(ctx, c, spec, func(ctx context.Context, n *node) (result, error) {
		stream, err := n.cluster.Snapshot(ctx, &ticketv1.SnapshotRequest{})
		if err != nil {
			return result{}, err
		}
		defer func() { _ = stream.Close() }()
		var r result
		for stream.Receive() {
			m := stream.Msg()
			if m.GetHeader() != nil {
				r.h = m.GetHeader()
			}
			r.data = append(r.data, m.GetData()...)
		}
		if err := stream.Err(); err != nil {
			return result{}, err
		}
		if r.h == nil {
			return result{}, connect.NewError(connect.CodeUnavailable, errors.New("snapshot stream ended without a header"))
		}
		if uint64(len(r.data)) != r.h.GetSizeBytes() {
			return result{}, connect.NewError(connect.CodeUnavailable,
				fmt.Errorf("snapshot stream cut short: %d of %d bytes", len(r.data), r.h.GetSizeBytes()))
		}
		return r, nil
	})
	if err != nil {
		return nil, nil, err
	}
	return res.h, res.data, nil
}
