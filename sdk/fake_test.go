package sdk_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"

	"connectrpc.com/connect"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
)

// fakeCluster is a stand-in for ticketd below the SDK: N HTTP/2 servers over
// loopback that implement the generated handler interfaces on one shared
// in-memory lock table. Node leader serves; the others answer Unavailable
// with a LeaderHint (they do not forward). Leases never expire by
// themselves; tests call expire. Hooks inject failures.
type fakeCluster struct {
	t     *testing.T
	nodes []*fakeNode

	mu        sync.Mutex
	leader    int
	locks     map[string]*ticketv1.Lock
	lastToken uint64
	changed   chan struct{} // closed and replaced whenever a lock goes away
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
}

type fakeNode struct {
	c   *fakeCluster
	idx int
	srv *httptest.Server
}

func newFakeCluster(t *testing.T, n int) *fakeCluster {
	t.Helper()
	c := &fakeCluster{t: t, locks: map[string]*ticketv1.Lock{}, changed: make(chan struct{})}
	for i := range n {
		fn := &fakeNode{c: c, idx: i}
		mux := http.NewServeMux()
		mux.Handle(ticketv1connect.NewLockServiceHandler(fn))
		mux.Handle(ticketv1connect.NewClusterServiceHandler(fn))
		fn.srv = httptest.NewUnstartedServer(mux)
		fn.srv.Config.Protocols = new(http.Protocols)
		fn.srv.Config.Protocols.SetHTTP1(true)
		fn.srv.Config.Protocols.SetUnencryptedHTTP2(true)
		fn.srv.Start()
		c.nodes = append(c.nodes, fn)
	}
	t.Cleanup(c.close)
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

// expire removes key's lock as the leader's lessor would.
func (c *fakeCluster) expire(key string) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.removeLocked(key)
}

func (c *fakeCluster) removeLocked(key string) {
	delete(c.locks, key)
	close(c.changed)
	c.changed = make(chan struct{})
}

func (c *fakeCluster) holder(key string) *ticketv1.Lock {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.locks[key]
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
		c.t.Errorf("error detail: %v", derr)
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
	if err := n.enter("Acquire", fakeCall{owner: req.GetOwner()}); err != nil {
		return nil, err
	}
	if req.GetKey() == "" || req.GetLeaseMs() <= 0 {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("bad key or lease"))
	}
	c := n.c
	for {
		c.mu.Lock()
		l := c.locks[req.GetKey()]
		switch {
		case l == nil:
			c.lastToken++
			l = &ticketv1.Lock{Key: req.GetKey(), Token: c.lastToken, LeaseMs: req.GetLeaseMs(), Owner: req.GetOwner()}
			c.locks[req.GetKey()] = l
			fallthrough
		case l.GetOwner() == req.GetOwner():
			res := &ticketv1.AcquireResponse{Token: l.GetToken(), LeaseMs: l.GetLeaseMs()}
			c.mu.Unlock()
			if err := n.leave(ctx, "Acquire", req); err != nil {
				return nil, err
			}
			return res, nil
		case !req.GetWait():
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

func (n *fakeNode) Release(ctx context.Context, req *ticketv1.ReleaseRequest) (*ticketv1.ReleaseResponse, error) {
	if err := n.enter("Release", fakeCall{token: req.GetToken()}); err != nil {
		return nil, err
	}
	c := n.c
	c.mu.Lock()
	l := c.locks[req.GetKey()]
	if l == nil || l.GetToken() != req.GetToken() {
		c.mu.Unlock()
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such lock"))
	}
	c.removeLocked(req.GetKey())
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
	l := c.locks[req.GetKey()]
	if l == nil || l.GetToken() != req.GetToken() {
		return nil, connect.NewError(connect.CodeNotFound, errors.New("no such lock"))
	}
	return &ticketv1.RenewResponse{LeaseMs: l.GetLeaseMs()}, nil
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
	return &ticketv1.GetLockResponse{Held: true, Token: l.GetToken(), LeaseMs: l.GetLeaseMs(), RemainingMs: l.GetLeaseMs(), Owner: l.GetOwner()}, nil
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
		res.Locks = append(res.Locks, c.locks[k])
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
	return &ticketv1.CheckTokenResponse{Valid: l != nil && l.GetToken() == req.GetToken(), CurrentToken: l.GetToken()}, nil
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
		LeaderAddr: c.nodes[c.leader].srv.Listener.Addr().String(),
		LastToken:  c.lastToken, LocksHeld: int64(len(c.locks)), Members: members,
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
