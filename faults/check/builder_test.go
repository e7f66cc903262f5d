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

// mode is the fields by which an Acquire asks for a shared lock, a
// semaphore slot or a holder under a session.
type mode struct {
	shared  bool
	limit   uint32
	session uint64
}

var (
	shared = mode{shared: true}
	excl   = mode{}
)

func sem(limit uint32) mode { return mode{limit: limit} }

func under(session uint64) mode { return mode{session: session} }

// acquireM records an OK Acquire with mode m that returned token.
func (h *hist) acquireM(client int, key, owner string, m mode, leaseMS int64, call, ret int64, token uint64) *history.Op {
	return h.add(history.Op{Client: client, Kind: history.Acquire, Key: key, Owner: owner, LeaseMS: leaseMS,
		Shared: m.shared, Limit: m.limit, Session: m.session,
		Outcome: history.OK, Token: token, ResLeaseMS: leaseMS}, call, ret)
}

// acquireRefusedM records an Acquire with mode m refused with code.
func (h *hist) acquireRefusedM(client int, key, owner string, m mode, code connect.Code, call, ret int64) *history.Op {
	return h.add(history.Op{Client: client, Kind: history.Acquire, Key: key, Owner: owner, LeaseMS: 1000,
		Shared: m.shared, Limit: m.limit, Session: m.session, Outcome: history.Fail, Code: code.String()}, call, ret)
}

// acquireUnknownM records an Acquire with mode m whose outcome is unknown.
func (h *hist) acquireUnknownM(client int, key, owner string, m mode, leaseMS int64, call, ret int64) {
	h.add(history.Op{Client: client, Kind: history.Acquire, Key: key, Owner: owner, LeaseMS: leaseMS,
		Shared: m.shared, Limit: m.limit, Session: m.session, Outcome: history.Unknown, Code: "deadline_exceeded"}, call, ret)
}

// getM records an OK Get that saw holders (token, owner pairs) of a key of mode m.
func (h *hist) getM(client int, key string, m mode, call, ret int64, holders ...history.Holder) *history.Op {
	op := history.Op{Client: client, Kind: history.Get, Key: key, Outcome: history.OK,
		Held: len(holders) > 0, Holders: holders, KeyShared: m.shared && len(holders) > 0, KeyLimit: m.limit}
	if len(holders) == 1 && !m.shared && m.limit == 0 {
		op.HolderToken, op.HolderOwner = holders[0].Token, holders[0].Owner
	}
	return h.add(op, call, ret)
}

func hd(token uint64, owner string) history.Holder { return history.Holder{Token: token, Owner: owner} }

func (h *hist) createSession(client int, session uint64, ttlMS int64, call, ret int64) {
	h.add(history.Op{Client: client, Kind: history.CreateSession, LeaseMS: ttlMS, Session: session,
		Outcome: history.OK, ResLeaseMS: ttlMS}, call, ret)
}

func (h *hist) keepAlive(client int, session uint64, ttlMS int64, out history.Outcome, call, ret int64) {
	op := history.Op{Client: client, Kind: history.KeepAlive, Session: session, Outcome: out}
	if out == history.OK {
		op.ResLeaseMS = ttlMS
	}
	h.add(op, call, ret)
}

func (h *hist) closeSession(client int, session uint64, out history.Outcome, call, ret int64) {
	h.add(history.Op{Client: client, Kind: history.CloseSession, Session: session, Outcome: out}, call, ret)
}
