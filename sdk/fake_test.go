package sdk_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"
	"google.golang.org/protobuf/proto"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// fakeCluster is a stand-in for ticketd below the SDK: N HTTP/2 servers over
// loopback that implement the generated handler interfaces on one shared
// in-memory lock table. Node leader serves; the others answer Unavailable
// with a LeaderHint (they do not forward). Leases never expire by
// themselves; tests call expire and expireSession. Hooks inject failures.
// A key holds a set of holders (shared locks, semaphores); the
// fake grants whatever fits and wakes every waiter on each change, without
// the server's FIFO order or writer preference. Every change is one entry
// of a log with its own index, which Watch streams (watch_fake_test.go).
type fakeCluster struct {
	nodes []*fakeNode

	mu        sync.Mutex
	leader    int
	locks     map[string]*ticketv1.Lock // every holder in Holders; the singular fields for an exclusive lock
	lastToken uint64
	sessions  map[uint64]int64 // live session id → ttl_ms
	lastSess  uint64
	changed   chan struct{}          // closed and replaced whenever the lock table changes
	index     uint64                 // the last entry's index
	events    []*ticketv1.WatchEvent // every change, in index order
	calls     []fakeCall
	// hook, when set, runs on the leader after a request was handled and
	// before its reply: a non-nil error replaces the reply. It is called
	// without mu held.
	hook func(ctx context.Context, method string, req any) error
}

// fakeCall records one request a node received.
type fakeCall struct {
	node   int
	method string
	owner  string // Acquire only
	token  uint64 // Renew, Release
	sess   uint64 // Acquire, KeepAlive, CloseSession
}

type fakeNode struct {
	c   *fakeCluster
	idx int
	srv *httptest.Server
}

// newFakeCluster starts a fake cluster of n nodes, closed when the test ends.
func newFakeCluster(t *testing.T, n int) *fakeCluster {
	t.Helper()
	c := startFakeCluster(n)
	t.Cleanup(c.close)
	return c
}

// startFakeCluster starts a fake cluster of n nodes; close stops it.
func startFakeCluster(n int) *fakeCluster {
	c := &fakeCluster{locks: map[string]*ticketv1.Lock{}, sessions: map[uint64]int64{}, lastSess: 1000, changed: make(chan struct{})}
	for i := range n {
		fn := &fakeNode{c: c, idx: i}
		mux := http.NewServeMux()
		mux.Handle(ticketv1connect.NewLockServiceHandler(fn))
		mux.Handle(ticketv1connect.NewClusterServiceHandler(fn))
		fn.srv = sdk.NewH2CServer(mux)
		c.nodes = append(c.nodes, fn)
	}
	return c
}

func (c *fakeCluster) close() {
	for _, n := range c.nodes {
		n.srv.CloseClientConnections()
		n.srv.Close()
	}
}

// addr returns node i's API address, "127.0.0.1:port".
func (c *fakeCluster) addr(i int) string { return c.nodes[i].srv.Listener.Addr().String() }

// url returns node i's base URL as the SDK spells it.
func (c *fakeCluster) url(i int) string { return "http://" + c.addr(i) }

func (c *fakeCluster) endpoints() []string {
	var eps []string
	for i := range c.nodes {
		eps = append(eps, c.addr(i))
	}
	return eps
}

func (c *fakeCluster) setLeader(i int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.leader = i
}

func (c *fakeCluster) setHook(h func(ctx context.Context, method string, req any) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hook = h
}

// expire removes key's lock, every holder, as the leader's lessor would.
func (c *fakeCluster) expire(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.locks[key]
	var evs []*ticketv1.WatchEvent
	for _, h := range l.GetHolders() {
		evs = append(evs, fakeEvent(ticketv1.WatchEvent_TYPE_EXPIRED, l, h))
	}
	delete(c.locks, key)
	c.appendLocked(evs...)
}

// appendLocked records one entry: its events (none for an entry that
// changes nothing a watch sees) get the next index, and every waiter and
// watcher wakes up.
func (c *fakeCluster) appendLocked(evs ...*ticketv1.WatchEvent) {
	c.index++
	for _, ev := range evs {
		ev.Index = c.index
		c.events = append(c.events, ev)
	}
	c.changedLocked()
}

// fakeEvent is the watch event of a change of type typ to holder h of l.
func fakeEvent(typ ticketv1.WatchEvent_Type, l *ticketv1.Lock, h *ticketv1.Holder) *ticketv1.WatchEvent {
	ev := &ticketv1.WatchEvent{Type: typ, Key: l.GetKey(), Token: h.GetToken(), Mode: l.GetMode(), Limit: l.GetLimit(), Session: h.GetSession()}
	if typ == ticketv1.WatchEvent_TYPE_GRANTED {
		ev.Owner, ev.LeaseMs = h.GetOwner(), h.GetLeaseMs()
	}
	return ev
}

// changedLocked wakes every waiter.
func (c *fakeCluster) changedLocked() {
	close(c.changed)
	c.changed = make(chan struct{})
}

// removeHolderLocked removes the holder of key with token and returns the
// watch event of its end (typ: released or expired), or nil when there
// was no such holder. The caller records the event's entry.
func (c *fakeCluster) removeHolderLocked(key string, token uint64, typ ticketv1.WatchEvent_Type) *ticketv1.WatchEvent {
	l := c.locks[key]
	if l == nil {
		return nil
	}
	for i, h := range l.Holders {
		if h.GetToken() == token {
			l.Holders = append(l.Holders[:i], l.Holders[i+1:]...)
			if len(l.Holders) == 0 {
				delete(c.locks, key)
			}
			return fakeEvent(typ, l, h)
		}
	}
	return nil
}

// expireSession ends session id as the leader's lessor would when its
// lease runs out: every lock under it goes in one step.
func (c *fakeCluster) expireSession(id uint64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.endSessionLocked(id, ticketv1.WatchEvent_TYPE_EXPIRED)
}

// endSessionLocked ends session id and every holder under it in one entry;
// typ says how they end (released: closed; expired: the lease ran out).
func (c *fakeCluster) endSessionLocked(id uint64, typ ticketv1.WatchEvent_Type) {
	delete(c.sessions, id)
	keys := make([]string, 0, len(c.locks))
	for key := range c.locks {
		keys = append(keys, key)
	}
	sort.Strings(keys) // one order of events, as every ticketd node sends them
	var evs []*ticketv1.WatchEvent
	for _, key := range keys {
		for _, h := range append([]*ticketv1.Holder(nil), c.locks[key].Holders...) {
			if h.GetSession() == id {
				evs = append(evs, c.removeHolderLocked(key, h.GetToken(), typ))
			}
		}
	}
	c.appendLocked(evs...)
}

// liveSessions returns the number of live sessions.
func (c *fakeCluster) liveSessions() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.sessions)
}

// holders returns a copy of key's holders.
func (c *fakeCluster) holders(key string) []*ticketv1.Holder {
	c.mu.Lock()
	defer c.mu.Unlock()
	l := c.locks[key]
	if l == nil {
		return nil
	}
	return append([]*ticketv1.Holder(nil), l.Holders...)
}

// holder returns a copy of key's lock (nil when free).
func (c *fakeCluster) holder(key string) *ticketv1.Lock {
	c.mu.Lock()
	defer c.mu.Unlock()
	if l := c.locks[key]; l != nil {
		return proto.Clone(l).(*ticketv1.Lock)
	}
	return nil
}

func (c *fakeCluster) tokens() uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lastToken
}

// callsTo returns the recorded calls of method (all nodes).
func (c *fakeCluster) callsTo(method string) []fakeCall {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []fakeCall
	for _, k := range c.calls {
		if k.method == method {
			out = append(out, k)
		}
	}
	return out
}

// enter records the call and, on a non-leader, returns the Unavailable
// error with a LeaderHint that ticketd followers send.
func (n *fakeNode) enter(method string, k fakeCall) error {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	k.node, k.method = n.idx, method
	c.calls = append(c.calls, k)
	if c.leader == n.idx {
		return nil
	}
	err := connect.NewError(connect.CodeUnavailable, errors.New("not leader"))
	d, derr := connect.NewErrorDetail(&ticketv1.LeaderHint{LeaderId: "n", LeaderAddr: c.nodes[c.leader].srv.Listener.Addr().String()})
	if derr != nil {
		return connect.NewError(connect.CodeInternal, derr)
	}
	err.AddDetail(d)
	return err
}

// leave runs the hook, if any.
func (n *fakeNode) leave(ctx context.Context, method string, req any) error {
	n.c.mu.Lock()
	h := n.c.hook
	n.c.mu.Unlock()
	if h == nil {
		return nil
	}
	return h(ctx, method, req)
}

func (n *fakeNode) Acquire(ctx context.Context, req *ticketv1.AcquireRequest) (*ticketv1.AcquireResponse, error) {
	if err := n.enter("Acquire", fakeCall{owner: req.GetOwner(), sess: req.GetSession()}); err != nil {
		return nil, err
	}
	if req.GetKey() == "" || (req.GetLeaseMs() <= 0 && req.GetSession() == 0) ||
		(req.GetMode() == ticketv1.Mode_MODE_SHARED && req.GetLimit() > 0) {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("bad key, lease or mode"))
	}
	c := n.c
	for {
		c.mu.Lock()
		leaseMS := req.GetLeaseMs()
		if s := req.GetSession(); s != 0 {
			ttl, ok := c.sessions[s]
			if !ok {
				c.mu.Unlock()
				return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("session %d not found", s))
			}
			leaseMS = ttl
		}
		l := c.locks[req.GetKey()]
		if l != nil && l.GetLimit() != req.GetLimit() {
			c.mu.Unlock()
			err := connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("key %q has limit %d", req.GetKey(), l.GetLimit()))
			d, derr := connect.NewErrorDetail(&ticketv1.LimitMismatch{Limit: l.GetLimit()})
			if derr != nil {
				return nil, derr
			}
			err.AddDetail(d)
			return nil, err
		}
		if h := fakeHolderOf(l, req.GetOwner()); h != nil && (l.GetMode() != req.GetMode() || h.GetSession() != req.GetSession()) {
			// As the servers: a same-owner request of another mode or
			// session is no retry, and never gets that holder's token.
			c.mu.Unlock()
			return nil, connect.NewError(connect.CodeFailedPrecondition,
				fmt.Errorf("the owner holds key %q as mode %v under session %d", req.GetKey(), l.GetMode(), h.GetSession()))
		}
		if h := fakeHolderOf(l, req.GetOwner()); h != nil {
			res := &ticketv1.AcquireResponse{Token: h.GetToken(), LeaseMs: h.GetLeaseMs(), Session: h.GetSession()}
			c.mu.Unlock()
			if err := n.leave(ctx, "Acquire", req); err != nil {
				return nil, err
			}
			return res, nil
		}
		if fakeFits(l, req) {
			c.lastToken++
			h := &ticketv1.Holder{Token: c.lastToken, Owner: req.GetOwner(), LeaseMs: leaseMS, RemainingMs: leaseMS, Session: req.GetSession()}
			if l == nil {
				l = &ticketv1.Lock{Key: req.GetKey(), Mode: req.GetMode(), Limit: req.GetLimit()}
				c.locks[req.GetKey()] = l
			}
			l.Holders = append(l.Holders, h)
			if l.GetMode() == ticketv1.Mode_MODE_EXCLUSIVE && l.GetLimit() == 0 {
				l.Token, l.LeaseMs, l.RemainingMs, l.Owner = h.GetToken(), h.GetLeaseMs(), h.GetRemainingMs(), h.GetOwner()
			}
			c.appendLocked(fakeEvent(ticketv1.WatchEvent_TYPE_GRANTED, l, h))
			res := &ticketv1.AcquireResponse{Token: h.GetToken(), LeaseMs: leaseMS, Session: req.GetSession()}
			c.mu.Unlock()
			if err := n.leave(ctx, "Acquire", req); err != nil {
				return nil, err
			}
			return res, nil
		}
		if !req.GetWait() {
			c.mu.Unlock()
			return nil, connect.NewError(connect.CodeAlreadyExists, errors.New("held"))
		}
		ch := c.changed
		c.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			return nil, connect.NewError(connect.CodeDeadlineExceeded, ctx.Err())
		}
	}
}

// fakeHolderOf returns the holder of l whose request carried owner, or nil.
func fakeHolderOf(l *ticketv1.Lock, owner string) *ticketv1.Holder {
	for _, h := range l.GetHolders() {
		if h.GetOwner() == owner {
			return h
		}
	}
	return nil
}

// fakeFits reports whether req can be granted beside l's holders.
func fakeFits(l *ticketv1.Lock, req *ticketv1.AcquireRequest) bool {
	switch {
	case len(l.GetHolders()) == 0:
		return true
	case req.GetLimit() > 0:
		return len(l.GetHolders()) < int(req.GetLimit())
	}
	return req.GetMode() == ticketv1.Mode_MODE_SHARED && l.GetMode() == ticketv1.Mode_MODE_SHARED
}

func (n *fakeNode) Release(ctx context.Context, req *ticketv1.ReleaseRequest) (*ticketv1.ReleaseResponse, error) {
	if err := n.enter("Release", fakeCall{token: req.GetToken()}); err != nil {
		return nil, err
	}
	c := n.c
	c.mu.Lock()
	ev := c.removeHolderLocked(req.GetKey(), req.GetToken(), ticketv1.WatchEvent_TYPE_RELEASED)
	if ev == nil {
		c.mu.Unlock()
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such lock"))
	}
	c.appendLocked(ev)
	c.mu.Unlock()
	if err := n.leave(ctx, "Release", req); err != nil {
		return nil, err
	}
	return &ticketv1.ReleaseResponse{}, nil
}

func (n *fakeNode) Renew(ctx context.Context, req *ticketv1.RenewRequest) (*ticketv1.RenewResponse, error) {
	if err := n.enter("Renew", fakeCall{token: req.GetToken()}); err != nil {
		return nil, err
	}
	if err := n.leave(ctx, "Renew", req); err != nil {
		return nil, err
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, h := range c.locks[req.GetKey()].GetHolders() {
		if h.GetToken() != req.GetToken() {
			continue
		}
		if h.GetSession() != 0 {
			return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("held under session %d: keep the session alive", h.GetSession()))
		}
		return &ticketv1.RenewResponse{LeaseMs: h.GetLeaseMs()}, nil
	}
	return nil, connect.NewError(connect.CodeNotFound, errors.New("no such lock"))
}

func (n *fakeNode) GetLock(ctx context.Context, req *ticketv1.GetLockRequest) (*ticketv1.GetLockResponse, error) {
	if !req.GetStale() {
		if err := n.enter("GetLock", fakeCall{}); err != nil {
			return nil, err
		}
	}
	l := n.c.holder(req.GetKey())
	if l == nil {
		return &ticketv1.GetLockResponse{}, nil
	}
	return &ticketv1.GetLockResponse{Held: true, Token: l.GetToken(), LeaseMs: l.GetLeaseMs(), RemainingMs: l.GetRemainingMs(), Owner: l.GetOwner(),
		Holders: l.GetHolders(), Mode: l.GetMode(), Limit: l.GetLimit()}, nil
}

// ListLocks serves pages of at most two locks, so that paging is exercised.
func (n *fakeNode) ListLocks(ctx context.Context, req *ticketv1.ListLocksRequest) (*ticketv1.ListLocksResponse, error) {
	if err := n.enter("ListLocks", fakeCall{}); err != nil {
		return nil, err
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	var keys []string
	for k := range c.locks {
		if strings.HasPrefix(k, req.GetPrefix()) && k > req.GetPageToken() {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	res := &ticketv1.ListLocksResponse{}
	for i, k := range keys {
		if i == 2 {
			res.NextPageToken = keys[1]
			break
		}
		res.Locks = append(res.Locks, proto.Clone(c.locks[k]).(*ticketv1.Lock))
	}
	return res, nil
}

func (n *fakeNode) CheckToken(ctx context.Context, req *ticketv1.CheckTokenRequest) (*ticketv1.CheckTokenResponse, error) {
	if err := n.enter("CheckToken", fakeCall{token: req.GetToken()}); err != nil {
		return nil, err
	}
	if req.GetToken() == 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("token 0"))
	}
	l := n.c.holder(req.GetKey())
	res := &ticketv1.CheckTokenResponse{Mode: l.GetMode(), Limit: l.GetLimit()}
	for _, h := range l.GetHolders() {
		res.Valid = res.Valid || h.GetToken() == req.GetToken()
		res.CurrentToken = max(res.CurrentToken, h.GetToken())
	}
	return res, nil
}

func (n *fakeNode) CreateSession(ctx context.Context, req *ticketv1.CreateSessionRequest) (*ticketv1.CreateSessionResponse, error) {
	if err := n.enter("CreateSession", fakeCall{}); err != nil {
		return nil, err
	}
	if req.GetTtlMs() <= 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("bad ttl"))
	}
	c := n.c
	c.mu.Lock()
	c.lastSess++
	id := c.lastSess
	c.sessions[id] = req.GetTtlMs()
	c.mu.Unlock()
	if err := n.leave(ctx, "CreateSession", req); err != nil {
		return nil, err
	}
	return &ticketv1.CreateSessionResponse{Session: id, TtlMs: req.GetTtlMs()}, nil
}

func (n *fakeNode) KeepAlive(ctx context.Context, req *ticketv1.KeepAliveRequest) (*ticketv1.KeepAliveResponse, error) {
	if err := n.enter("KeepAlive", fakeCall{sess: req.GetSession()}); err != nil {
		return nil, err
	}
	if err := n.leave(ctx, "KeepAlive", req); err != nil {
		return nil, err
	}
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	ttl, ok := c.sessions[req.GetSession()]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("session %d not found", req.GetSession()))
	}
	return &ticketv1.KeepAliveResponse{TtlMs: ttl}, nil
}

// KeepAliveStream serves every message as a KeepAlive (with its hooks and
// call record) and ends the stream at the first error, as a node does.
func (n *fakeNode) KeepAliveStream(ctx context.Context, stream *connect.BidiStream[ticketv1.KeepAliveRequest, ticketv1.KeepAliveResponse]) error {
	for {
		req, err := stream.Receive()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		res, err := n.KeepAlive(ctx, req)
		if err != nil {
			return err
		}
		if err := stream.Send(res); err != nil {
			return err
		}
	}
}

// GetSession is not served by the fake: the real cluster's tests cover it.
func (n *fakeNode) GetSession(context.Context, *ticketv1.GetSessionRequest) (*ticketv1.GetSessionResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("fake: GetSession"))
}

// ListSessions is not served by the fake: the real cluster's tests cover it.
func (n *fakeNode) ListSessions(context.Context, *ticketv1.ListSessionsRequest) (*ticketv1.ListSessionsResponse, error) {
	return nil, connect.NewError(connect.CodeUnimplemented, errors.New("fake: ListSessions"))
}

func (n *fakeNode) CloseSession(ctx context.Context, req *ticketv1.CloseSessionRequest) (*ticketv1.CloseSessionResponse, error) {
	if err := n.enter("CloseSession", fakeCall{sess: req.GetSession()}); err != nil {
		return nil, err
	}
	c := n.c
	c.mu.Lock()
	if _, ok := c.sessions[req.GetSession()]; !ok {
		c.mu.Unlock()
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("session %d not found", req.GetSession()))
	}
	c.endSessionLocked(req.GetSession(), ticketv1.WatchEvent_TYPE_RELEASED)
	c.mu.Unlock()
	if err := n.leave(ctx, "CloseSession", req); err != nil {
		return nil, err
	}
	return &ticketv1.CloseSessionResponse{}, nil
}

func (n *fakeNode) Status(ctx context.Context, req *ticketv1.StatusRequest) (*ticketv1.StatusResponse, error) {
	c := n.c
	c.mu.Lock()
	defer c.mu.Unlock()
	c.calls = append(c.calls, fakeCall{node: n.idx, method: "Status"})
	var members []*ticketv1.Member
	for i, m := range c.nodes {
		members = append(members, &ticketv1.Member{Id: string(rune('a' + i)), ApiAddr: m.srv.Listener.Addr().String(), Voter: true})
	}
	return &ticketv1.StatusResponse{
		NodeId: string(rune('a' + n.idx)), LeaderId: string(rune('a' + c.leader)),
		LeaderAddr: c.nodes[c.leader].srv.Listener.Addr().String(), Members: members,
		// One term: the fake never elects.
		Term: 1, CommitIndex: c.index, AppliedIndex: c.index, LastToken: c.lastToken, LocksHeld: int64(len(c.locks)),
	}, nil
}

func (n *fakeNode) AddMember(ctx context.Context, req *ticketv1.AddMemberRequest) (*ticketv1.AddMemberResponse, error) {
	if err := n.enter("AddMember", fakeCall{}); err != nil {
		return nil, err
	}
	return &ticketv1.AddMemberResponse{Members: []*ticketv1.Member{req.GetMember()}}, nil
}

func (n *fakeNode) RemoveMember(ctx context.Context, req *ticketv1.RemoveMemberRequest) (*ticketv1.RemoveMemberResponse, error) {
	if err := n.enter("RemoveMember", fakeCall{}); err != nil {
		return nil, err
	}
	return &ticketv1.RemoveMemberResponse{}, nil
}

// TransferLeader moves leadership to node "a", "b", ... as named by id.
func (n *fakeNode) TransferLeader(ctx context.Context, req *ticketv1.TransferLeaderRequest) (*ticketv1.TransferLeaderResponse, error) {
	if err := n.enter("TransferLeader", fakeCall{}); err != nil {
		return nil, err
	}
	if len(req.GetId()) != 1 || int(req.GetId()[0]-'a') >= len(n.c.nodes) {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("no such node"))
	}
	n.c.setLeader(int(req.GetId()[0] - 'a'))
	return &ticketv1.TransferLeaderResponse{LeaderId: req.GetId()}, nil
}
