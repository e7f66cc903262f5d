package check_test

import (
	"connectrpc.com/connect"

	"github.com/ticketd/ticketd/faults/history"
)

// hist builds small histories by hand; times are in milliseconds.
type hist struct{ ops []history.Op }

const ms = int64(1e6)

func (h *hist) add(op history.Op, call, ret int64) *history.Op {
	op.ID = len(h.ops)
	op.Call, op.Return = call*ms, ret*ms
	h.ops = append(h.ops, op)
	return &h.ops[len(h.ops)-1]
}

// acquire records an OK Acquire that returned token.
func (h *hist) acquire(client int, key, owner string, leaseMS int64, call, ret int64, token uint64) {
	h.add(history.Op{Client: client, Kind: history.Acquire, Key: key, Owner: owner, LeaseMS: leaseMS,
		Outcome: history.OK, Token: token, ResLeaseMS: leaseMS}, call, ret)
}

func (h *hist) acquireWait(client int, key, owner string, leaseMS int64, call, ret int64, token uint64) {
	h.add(history.Op{Client: client, Kind: history.Acquire, Key: key, Owner: owner, LeaseMS: leaseMS, Wait: true,
		Outcome: history.OK, Token: token, ResLeaseMS: leaseMS}, call, ret)
}

func (h *hist) acquireHeld(client int, key, owner string, call, ret int64) {
	h.add(history.Op{Client: client, Kind: history.Acquire, Key: key, Owner: owner, LeaseMS: 1000,
		Outcome: history.Fail, Code: connect.CodeAlreadyExists.String()}, call, ret)
}

func (h *hist) acquireUnknown(client int, key, owner string, leaseMS int64, call, ret int64) {
	h.add(history.Op{Client: client, Kind: history.Acquire, Key: key, Owner: owner, LeaseMS: leaseMS,
		Outcome: history.Unknown, Code: "deadline_exceeded"}, call, ret)
}

func (h *hist) release(client int, key string, token uint64, out history.Outcome, call, ret int64) {
	code := ""
	if out == history.Fail {
		code = connect.CodeNotFound.String()
	}
	h.add(history.Op{Client: client, Kind: history.Release, Key: key, Token: token, Outcome: out, Code: code}, call, ret)
}

func (h *hist) renew(client int, key string, token uint64, leaseMS int64, out history.Outcome, call, ret int64) {
	code := ""
	if out == history.Fail {
		code = connect.CodeNotFound.String()
	}
	op := history.Op{Client: client, Kind: history.Renew, Key: key, Token: token, Outcome: out, Code: code}
	if out == history.OK {
		op.ResLeaseMS = leaseMS
	}
	h.add(op, call, ret)
}

func (h *hist) getHeld(client int, key string, token uint64, owner string, call, ret int64) *history.Op {
	return h.add(history.Op{Client: client, Kind: history.Get, Key: key, Outcome: history.OK,
		Held: true, HolderToken: token, HolderOwner: owner}, call, ret)
}

func (h *hist) getFree(client int, key string, call, ret int64) *history.Op {
	return h.add(history.Op{Client: client, Kind: history.Get, Key: key, Outcome: history.OK}, call, ret)
}

func (h *hist) checkToken(client int, key string, token uint64, valid bool, current uint64, call, ret int64) {
	h.add(history.Op{Client: client, Kind: history.CheckToken, Key: key, Token: token, Outcome: history.OK,
		Valid: valid, HolderToken: current}, call, ret)
}
