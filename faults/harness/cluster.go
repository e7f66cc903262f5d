//go:build faults

package harness

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"

	"github.com/ticketd/ticketd/faults/nemesis"
	"github.com/ticketd/ticketd/faults/powerfs"
)

// rulesEnv names the environment variable a ticketd built with -tags faults
// reads the path of its link-cut rules file from (server/cmd/ticketd/faults_hook.go).
const rulesEnv = "TICKETD_FAULTS_RULES"

// Cluster is what a run drives and injects faults into: by default
// ticketd processes on loopback (sdk/ticketdtest, links cut by the
// DropMessage rules file); with Config.Start, anything else that meets it,
// such as hosts in network namespaces (faults/hosts).
type Cluster interface {
	nemesis.Target
	// NodeID returns node i's id.
	NodeID(i int) string
	// Lock and Cluster return clients of node i's API.
	Lock(i int) ticketv1connect.LockServiceClient
	Cluster(i int) ticketv1connect.ClusterServiceClient
	// Running returns the nodes whose process is alive and not paused.
	Running() []int
	// LogFile returns the path of node i's log.
	LogFile(i int) string
}

// target implements Cluster over a ticketdtest cluster.
type target struct {
	c     *ticketdtest.Cluster
	rules string
	// logMark is, per node, the size of its log when a disk fault was
	// injected: Exited reads only what the node logged after it (disk.go).
	logMark map[int]int64
	// power is the file system the data dirs are on with Config.PowerLoss
	// (nil otherwise), powerLog what its cuts dropped (power.go).
	power    *powerfs.FS
	powerLog powerState
}

var _ Cluster = (*target)(nil)

func (k *target) Size() int { return k.c.Len() }

func (k *target) NodeID(i int) string { return k.c.Node(i).ID }

func (k *target) LogFile(i int) string { return k.c.Node(i).LogFile }

func (k *target) Lock(i int) ticketv1connect.LockServiceClient { return k.c.Lock(i) }

func (k *target) Cluster(i int) ticketv1connect.ClusterServiceClient { return k.c.Cluster(i) }

func (k *target) Running() []int { return k.c.Running() }

// status asks node i of c for its status, bounded by ctx and a second.
func status(ctx context.Context, c Cluster, i int) (*ticketv1.StatusResponse, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Second)
	defer cancel()
	return c.Cluster(i).Status(ctx, &ticketv1.StatusRequest{})
}

// Leader returns the running node that reports itself leader with the
// highest term (a deposed leader cut off from the others may still think it
// leads, in an older term), polling until there is one or ctx ends.
func (k *target) Leader(ctx context.Context) (int, error) {
	for {
		best, term := -1, uint64(0)
		for _, i := range k.c.Running() {
			st, err := status(ctx, k, i)
			if err == nil && st.GetLeaderId() == st.GetNodeId() && st.GetTerm() >= term {
				best, term = i, st.GetTerm()
			}
		}
		if best >= 0 {
			return best, nil
		}
		select {
		case <-ctx.Done():
			return -1, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// agreedLeader waits until every running node of k names the same leader, which
// is one of them, or ctx ends.
func agreedLeader(ctx context.Context, k Cluster) (int, error) {
	for {
		leader, agreed := "", true
		for _, i := range k.Running() {
			st, err := status(ctx, k, i)
			if err != nil || st.GetLeaderId() == "" || (leader != "" && st.GetLeaderId() != leader) {
				agreed = false
				break
			}
			leader = st.GetLeaderId()
		}
		if agreed && leader != "" {
			for _, i := range k.Running() {
				if k.NodeID(i) == leader {
					return i, nil
				}
			}
		}
		select {
		case <-ctx.Done():
			return -1, fmt.Errorf("no agreed leader: %w", ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func (k *target) Kill(i int) error   { k.c.Kill(i); return nil }
func (k *target) Start(i int) error  { k.c.Restart(i); return nil }
func (k *target) Pause(i int) error  { return k.c.Pause(i) }
func (k *target) Resume(i int) error { k.c.Cont(i); return nil }

// Cut rewrites the rules file atomically (write, then rename).
func (k *target) Cut(links [][2]int) error {
	lines := make([]string, 0, len(links))
	for _, l := range links {
		lines = append(lines, k.NodeID(l[0])+" "+k.NodeID(l[1]))
	}
	sort.Strings(lines)
	tmp := k.rules + ".tmp"
	if err := os.WriteFile(tmp, []byte(strings.Join(lines, "\n")+"\n"), 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, k.rules)
}

func (k *target) TransferLeader(ctx context.Context, from, to int) error {
	_, err := k.c.Cluster(from).TransferLeader(ctx, &ticketv1.TransferLeaderRequest{Id: k.NodeID(to)})
	return err
}

func (k *target) RemoveMember(ctx context.Context, i int) error {
	l, err := k.Leader(ctx)
	if err != nil {
		return err
	}
	_, err = k.c.Cluster(l).RemoveMember(ctx, &ticketv1.RemoveMemberRequest{Id: k.NodeID(i)})
	return err
}

func (k *target) AddMember(ctx context.Context, i int) error {
	l, err := k.Leader(ctx)
	if err != nil {
		return err
	}
	n := k.c.Node(i)
	_, err = k.c.Cluster(l).AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{
		Id: n.ID, RaftAddr: n.RaftAddr, ApiAddr: n.APIAddr, Voter: true,
	}})
	return err
}

// copyLogs copies every node's log file into dir.
func copyLogs(k Cluster, dir string) error {
	for i := range k.Size() {
		b, err := os.ReadFile(k.LogFile(i))
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, k.NodeID(i)+".log"), b, 0o644); err != nil {
			return err
		}
	}
	return nil
}
