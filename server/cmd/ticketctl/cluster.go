package main

import (
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// memberJSON is a cluster member as -o json prints it: the API's Member
// message in its JSON (protojson names).
type memberJSON struct {
	ID       string `json:"id"`
	RaftAddr string `json:"raftAddr"`
	APIAddr  string `json:"apiAddr"`
	Voter    bool   `json:"voter"`
}

// statusJSON is one node's status as -o json prints it: StatusResponse in
// the API's JSON (protojson names, 64-bit integers as strings); with
// "status --all", Endpoint names the node asked and Error says why it did
// not answer (the other fields are then left out).
type statusJSON struct {
	Endpoint     string       `json:"endpoint,omitempty"`
	Error        string       `json:"error,omitempty"`
	NodeID       string       `json:"nodeId,omitempty"`
	Backend      string       `json:"backend,omitempty"`
	LeaderID     string       `json:"leaderId,omitempty"`
	LeaderAddr   string       `json:"leaderAddr,omitempty"`
	Term         uint64       `json:"term,omitempty,string"`
	CommitIndex  uint64       `json:"commitIndex,omitempty,string"`
	AppliedIndex uint64       `json:"appliedIndex,omitempty,string"`
	LastToken    uint64       `json:"lastToken,omitempty,string"`
	LocksHeld    int64        `json:"locksHeld,omitempty,string"`
	Members      []memberJSON `json:"members,omitempty"`
	// Replaying is true while the node replays its log after a restart, up
	// to ReplayTargetIndex (it refuses stale reads until then).
	Replaying         bool   `json:"replaying,omitempty"`
	ReplayTargetIndex uint64 `json:"replayTargetIndex,omitempty,string"`
	// MaxCommandVersion is the highest replicated command version the
	// node's binary applies (0, left out: a release older than the field;
	// docs/operations.md#upgrades).
	MaxCommandVersion uint32 `json:"maxCommandVersion,omitempty"`
}

// value is what -o value prints: the leader's id ("" when none is known).
func (s statusJSON) value() string { return s.LeaderID }

// statusRow renders one "status --all" row: an unreachable node shows "-"
// in every column and its error, a replaying node says how far it is
// instead of a bare applied index.
func statusRow(n statusJSON) string {
	if n.Error != "" {
		return fmt.Sprintf("%s\t-\t-\t-\t-\t-\t-\t-\t%s\n", n.Endpoint, n.Error)
	}
	applied := fmt.Sprint(n.AppliedIndex)
	note := ""
	if n.Replaying {
		applied = fmt.Sprintf("replaying, %d of %d", n.AppliedIndex, n.ReplayTargetIndex)
		note = "replaying its log after a restart (stale reads refused until done)"
	}
	leader := n.LeaderID
	if leader == "" {
		leader = "none"
	}
	return fmt.Sprintf("%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\t%s\n", n.Endpoint, n.NodeID, leader,
		n.Term, n.CommitIndex, applied, knownOr(n, n.LastToken, "unknown"), knownOr(n, n.LocksHeld, "unknown"), note)
}

// membersOf converts the API's members for printing (never nil, so JSON shows []).
func membersOf(ms []*ticketv1.Member) []memberJSON {
	out := []memberJSON{}
	for _, m := range ms {
		out = append(out, memberJSON{ID: m.GetId(), RaftAddr: m.GetRaftAddr(), APIAddr: m.GetApiAddr(), Voter: m.GetVoter()})
	}
	return out
}

// statusOf converts a Status response for printing.
func statusOf(s *ticketv1.StatusResponse) statusJSON {
	return statusJSON{
		NodeID: s.GetNodeId(), Backend: s.GetBackend(), LeaderID: s.GetLeaderId(), LeaderAddr: s.GetLeaderAddr(),
		Term: s.GetTerm(), CommitIndex: s.GetCommitIndex(), AppliedIndex: s.GetAppliedIndex(),
		LastToken: s.GetLastToken(), LocksHeld: s.GetLocksHeld(), Members: membersOf(s.GetMembers()),
		Replaying: s.GetReplaying(), ReplayTargetIndex: s.GetReplayTargetIndex(),
		MaxCommandVersion: s.GetMaxCommandVersion(),
	}.withoutReplayGuesses()
}

// withoutReplayGuesses leaves out, while the node replays its log after a
// restart, what its half-rebuilt lock table would report: the last token
// and the locks held are those of an older state, not the cluster's (zeros
// right after a start, which read as data loss). The Raft fields (term,
// commit and applied index) are current and kept.
func (s statusJSON) withoutReplayGuesses() statusJSON {
	if s.Replaying {
		s.LastToken, s.LocksHeld = 0, 0
	}
	return s
}

// knownOr renders n, or unknown while the node replays (its lock table is
// behind: see withoutReplayGuesses).
func knownOr[N int64 | uint64](s statusJSON, n N, unknown string) string {
	if s.Replaying {
		return unknown
	}
	return fmt.Sprint(n)
}

// writeStatus renders "status" for people. A replaying node says so, with
// how far it is, and says "unknown (replaying)" for what it cannot know yet.
func writeStatus(w io.Writer, s statusJSON) {
	switch {
	case s.LeaderID == "":
		fmt.Fprintf(w, "leader:        none known (election in progress or no quorum)\n")
	case s.LeaderAddr == "":
		fmt.Fprintf(w, "leader:        %s (API address not known yet)\n", s.LeaderID)
	default:
		fmt.Fprintf(w, "leader:        %s (%s)\n", s.LeaderID, s.LeaderAddr)
	}
	if s.Replaying {
		fmt.Fprintf(w, "state:         replaying (applied %d of %d): its lock table is behind until then; stale reads are refused\n",
			s.AppliedIndex, s.ReplayTargetIndex)
	}
	fmt.Fprintf(w, "backend:       %s\n", s.Backend)
	if s.MaxCommandVersion != 0 {
		fmt.Fprintf(w, "applies:       command versions up to %d\n", s.MaxCommandVersion)
	}
	fmt.Fprintf(w, "term:          %d\n", s.Term)
	fmt.Fprintf(w, "commit index:  %d\n", s.CommitIndex)
	fmt.Fprintf(w, "applied index: %d\n", s.AppliedIndex)
	fmt.Fprintf(w, "last token:    %s\n", knownOr(s, s.LastToken, "unknown (replaying)"))
	fmt.Fprintf(w, "locks held:    %s\n\n", knownOr(s, s.LocksHeld, "unknown (replaying)"))
	printMembers(w, s.Members)
}

// printMembers writes ms as a table.
func printMembers(w io.Writer, ms []memberJSON) {
	tw := newTable(w, "ID\tRAFT ADDR\tAPI ADDR\tVOTER")
	for _, m := range ms {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%v\n", m.ID, m.RaftAddr, m.APIAddr, m.Voter)
	}
	_ = tw.Flush()
}

// nodesJSON is what "status --all" prints: one row per endpoint, in --endpoints order.
type nodesJSON struct {
	Nodes []statusJSON `json:"nodes"`
}

// value is what -o value prints: each endpoint's node id, one per line, in
// --endpoints order ("-" for an endpoint that did not answer).
func (n nodesJSON) value() string {
	ids := make([]string, 0, len(n.Nodes))
	for _, s := range n.Nodes {
		if s.Error != "" || s.NodeID == "" {
			ids = append(ids, "-")
			continue
		}
		ids = append(ids, s.NodeID)
	}
	return strings.Join(ids, "\n")
}

// newStatusCmd builds "status [--all]".
func newStatusCmd(g *globals) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the cluster as the leader sees it (--all: each endpoint's own view)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if all {
				return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
					out := nodesJSON{}
					for _, ep := range c.Endpoints() {
						st, err := c.NodeStatus(ctx, ep)
						row := statusJSON{Endpoint: ep}
						if err != nil {
							row.Error = err.Error()
						} else {
							row = statusOf(st)
							row.Endpoint = ep
							row.Members = nil
						}
						out.Nodes = append(out.Nodes, row)
					}
					return out, nil
				}, func(w io.Writer, v any) {
					tw := newTable(w, "ENDPOINT\tNODE\tLEADER\tTERM\tCOMMIT\tAPPLIED\tLAST TOKEN\tLOCKS\tERROR")
					for _, n := range v.(nodesJSON).Nodes {
						fmt.Fprint(tw, statusRow(n))
					}
					_ = tw.Flush()
				})
			}
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				st, err := c.Status(ctx)
				if err != nil {
					return nil, err
				}
				return statusOf(st), nil
			}, func(w io.Writer, v any) { writeStatus(w, v.(statusJSON)) })
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "ask every endpoint for its own view, one row each")
	return cmd
}

// membersResult is what the "members" subcommands print: the member list
// (after the change, for add and remove).
type membersResult struct {
	Members []memberJSON `json:"members"`
}

// value is what -o value prints: the member ids, one per line.
func (m membersResult) value() string {
	ids := make([]string, 0, len(m.Members))
	for _, x := range m.Members {
		ids = append(ids, x.ID)
	}
	return strings.Join(ids, "\n")
}

// newMembersCmd builds "members list|add|remove".
func newMembersCmd(g *globals) *cobra.Command {
	cmd := &cobra.Command{Use: "members", Short: "List, add and remove cluster members"}
	cmd.AddCommand(
		membersCmd(g, "list", "List the members of the cluster", cobra.NoArgs,
			func(ctx context.Context, c *sdk.Client, _ []string) ([]*ticketv1.Member, error) {
				st, err := c.Status(ctx)
				return st.GetMembers(), err
			}),
		membersCmd(g, "add ID RAFT_ADDR API_ADDR", "Add a voter (the node must be running and reachable by the leader)", cobra.ExactArgs(3),
			func(ctx context.Context, c *sdk.Client, args []string) ([]*ticketv1.Member, error) {
				return c.AddMember(ctx, args[0], args[1], args[2])
			}),
		membersCmd(g, "remove ID", "Remove a server from the cluster", cobra.ExactArgs(1),
			func(ctx context.Context, c *sdk.Client, args []string) ([]*ticketv1.Member, error) {
				return c.RemoveMember(ctx, args[0])
			}),
	)
	return cmd
}

// membersCmd builds a "members" subcommand whose fn returns the member list
// after its change; it prints that list as a table or as membersResult JSON.
func membersCmd(g *globals, use, short string, args cobra.PositionalArgs, fn func(ctx context.Context, c *sdk.Client, args []string) ([]*ticketv1.Member, error)) *cobra.Command {
	return &cobra.Command{
		Use:   use,
		Short: short,
		Args:  args,
		RunE: func(cmd *cobra.Command, args []string) error {
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				ms, err := fn(ctx, c, args)
				if err != nil {
					return nil, err
				}
				return membersResult{Members: membersOf(ms)}, nil
			}, func(w io.Writer, v any) { printMembers(w, v.(membersResult).Members) })
		},
	}
}

// transferJSON is what "transfer-leader" prints: the new leader's id.
type transferJSON struct {
	LeaderID string `json:"leaderId"`
}

// value is what -o value prints: the new leader's id.
func (t transferJSON) value() string { return t.LeaderID }

// newTransferLeaderCmd builds "transfer-leader [ID]".
func newTransferLeaderCmd(g *globals) *cobra.Command {
	return &cobra.Command{
		Use:   "transfer-leader [ID]",
		Short: "Hand leadership to voter ID, or to any up-to-date voter",
		Args:  cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id := ""
			if len(args) == 1 {
				id = args[0]
			}
			return g.do(cmd, func(ctx context.Context, c *sdk.Client) (any, error) {
				leader, err := c.TransferLeader(ctx, id)
				if err != nil {
					return nil, err
				}
				return transferJSON{LeaderID: leader}, nil
			}, func(w io.Writer, v any) {
				fmt.Fprintf(w, "leader is now %s\n", v.(transferJSON).LeaderID)
			})
		},
	}
}
