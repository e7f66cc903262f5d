// Package memraft is an in-memory, single-node stand-in for a consensus
// backend: it meets core.Consensus and core.Membership by applying every
// proposal at once to a real core.StateMachine, in the order proposals arrive,
// and calls the backends.Config hooks exactly as a real backend would (OnApply
// after every applied entry; OnLeaderChange with IsLeader=true only after its
// barrier entry applied).
//
// It exists for the server's unit tests, which need a consensus layer below
// the layer under test that they can steer: Demote and Promote simulate
// leadership changes, and SetProposeHook lets a test hold a proposal before it
// applies (to make a client give up mid-proposal). Its step-by-step mode
// (HoldProposals, HoldReads; then Commit, Apply, Confirm) lets a script hold
// proposals in the log and reads unanswered, and move them on one at a time,
// as the server's interaction tests do; SetApplyHook observes every applied
// entry, and it implements core.TermConfirmer and core.Submitter. It is
// never used by ticketd itself. Like hashicorp raft's InmemTransport, it is a real implementation of
// the interfaces, not a mock: the state machine, the encoding and the hooks
// are the production ones. It is held to the part of the backend contract a
// group of one voter keeps: conformance_test.go runs
// backendtest.RunSingleNode, which both real backends pass too.
//
// # Usage
//
//  1. Build a backends.Config as for a real backend (ID, RaftAddr, DataDir,
//     StateMachine, hooks) and call New.
//  2. Wait for OnLeaderChange(IsLeader=true); propose.
//  3. Call Demote/Promote to move leadership; Close when done.
//  4. For step-by-step runs, call HoldProposals(true) (and HoldReads(true)),
//     then Commit(n), Apply(n) and Confirm() between the steps of the test.
//  5. To simulate a restart (kill -9 and start on the same data), build the
//     node with NewDurable, Close it, and start another with
//     Recover(cfg, old.Entries(), term): it replays them through OnApply
//     and follows until Promote.
//
// Example:
//
//	n, err := memraft.New(cfg)
//	res, err := n.Propose(ctx, core.Grant("a", 1000, "me"))
package memraft
