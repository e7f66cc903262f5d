package ticketdtest

import "slices"

// Args returns a copy of the `ticketd serve` arguments node i is started
// with (its id, addresses, data dir, backend, bootstrap list and
// Options.Args), for a test that derives other commands from them
// (`ticketd restore`, a start with --force-new-cluster or --join).
func (c *Cluster) Args(i int) []string { return slices.Clone(c.nodes[i].args) }

// StartArgs starts node i, which must not be running, once with args (the
// whole `ticketd` command line after the binary) instead of its usual
// arguments; a later Restart uses the usual ones again. It does not wait
// for a leader.
func (c *Cluster) StartArgs(i int, args []string) {
	c.t.Helper()
	n := c.nodes[i]
	if n.Running() {
		c.t.Fatalf("ticketdtest: start %s: still running", n.ID)
	}
	n.mu.Lock()
	usual := n.args
	n.args = slices.Clone(args)
	n.mu.Unlock()
	err := c.start(i)
	n.mu.Lock()
	n.args = usual
	n.mu.Unlock()
	if err != nil {
		c.t.Fatalf("ticketdtest: start %s: %v", n.ID, err)
	}
}
