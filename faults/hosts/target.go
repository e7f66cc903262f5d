//go:build linux

package hosts

import (
	"context"
	"errors"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"

	"github.com/ticketd/ticketd/faults/nemesis"
)

// Cluster is a nemesis target with a real network: links are cut with
// blackhole routes, links go down on the bridge, and nodes move to new
// addresses.
var _ nemesis.NetTarget = (*Cluster)(nil)

// Size implements nemesis.Target: the number of nodes ever started.
func (c *Cluster) Size() int { return c.Len() }

// Start implements nemesis.Target: it starts node i again after Kill.
func (c *Cluster) Start(i int) error { return c.start(i) }

// Cut implements nemesis.Target: it replaces every blackhole route by one
// per link {from, to} (in from's namespace, for to's address). Links set
// down stay down. nil removes every route.
func (c *Cluster) Cut(links [][2]int) error {
	if err := c.net.Unblock(); err != nil {
		return err
	}
	var errs []error
	for _, l := range links {
		errs = append(errs, c.net.Block(c.Node(l[0]).Host, c.Node(l[1]).Host))
	}
	return errors.Join(errs...)
}

// TransferLeader implements nemesis.Target: it asks leader `from` to hand
// leadership to node `to`.
func (c *Cluster) TransferLeader(ctx context.Context, from, to int) error {
	_, err := c.Cluster(from).TransferLeader(ctx, &ticketv1.TransferLeaderRequest{Id: c.Node(to).ID})
	return err
}

// LinkDown implements nemesis.NetTarget: Network.Down of node i's host.
func (c *Cluster) LinkDown(i int) error { return c.net.Down(c.Node(i).Host) }

// LinkUp implements nemesis.NetTarget: Network.Up of node i's host.
func (c *Cluster) LinkUp(i int) error { return c.net.Up(c.Node(i).Host) }

// NodeID returns node i's id (harness.Cluster).
func (c *Cluster) NodeID(i int) string { return c.Node(i).ID }

// LogFile returns the path of node i's log (harness.Cluster).
func (c *Cluster) LogFile(i int) string { return c.Node(i).LogFile }
