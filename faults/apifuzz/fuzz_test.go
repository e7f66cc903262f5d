package apifuzz_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"sync"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/config"
)

// Bounds the node is configured with; the oracle below restates the rules
// of docs/api.md#errors (invalid_argument) independently of the server's own
// validation code.
const (
	minLeaseMS    = 100
	maxLeaseMS    = 600_000
	maxKeyBytes   = 1024
	maxOwnerBytes = 128
	// maxLimit is the largest semaphore limit (server.MaxLimit, restated).
	maxLimit = 4096
)

// node is one in-process ticketd shared by every input of this process.
type node struct {
	n       *server.Node
	url     string
	http    *http.Client
	lock    ticketv1connect.LockServiceClient
	cluster ticketv1connect.ClusterServiceClient
	dir     string
}

var (
	nodeOnce sync.Once
	theNode  *node
	nodeErr  error
)

func TestMain(m *testing.M) {
	code := m.Run()
	if theNode != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_ = theNode.n.Close(ctx)
		cancel()
		_ = os.RemoveAll(theNode.dir)
	}
	os.Exit(code)
}

func startNode() (*node, error) {
	dir, err := os.MkdirTemp("", "apifuzz-")
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	raftAddrs, err := ticketdtest.PickAddrs(1)
	if err != nil {
		return nil, err
	}
	cfg := config.DefaultConfig()
	cfg.ID, cfg.APIAddr, cfg.RaftAddr, cfg.DataDir = "n1", ln.Addr().String(), raftAddrs[0], dir
	cfg.Backend = config.BackendHashicorp
	cfg.Lease = config.Lease{MinMS: minLeaseMS, MaxMS: maxLeaseMS}
	cfg.Raft.ElectionTimeoutMS, cfg.Raft.HeartbeatMS = 300, 50
	n, err := server.New(cfg, server.WithLogger(zap.NewNop()))
	if err != nil {
		return nil, err
	}
	go func() { _ = n.Serve(ln) }()
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	p.SetHTTP1(true)
	hc := &http.Client{Transport: &http.Transport{Protocols: &p}}
	url := "http://" + ln.Addr().String()
	nd := &node{n: n, url: url, http: hc, dir: dir,
		lock:    ticketv1connect.NewLockServiceClient(hc, url),
		cluster: ticketv1connect.NewClusterServiceClient(hc, url)}
	deadline := time.Now().Add(30 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		st, err := nd.cluster.Status(ctx, &ticketv1.StatusRequest{})
		cancel()
		if err == nil && st.GetLeaderId() == "n1" {
			// The leader must also serve writes (promotion after its barrier).
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			_, err = nd.lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: "ready"})
			cancel()
			if err == nil {
				return nd, nil
			}
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("node not ready: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func getNode(t *testing.T) *node {
	t.Helper()
	nodeOnce.Do(func() { theNode, nodeErr = startNode() })
	if nodeErr != nil {
		t.Fatal(nodeErr)
	}
	return theNode
}

// tableState is what any change to the lock table moves.
type tableState struct {
	lastToken uint64
	locks     int64
	applied   uint64
}

func (nd *node) state(t *testing.T) tableState {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	st, err := nd.cluster.Status(ctx, &ticketv1.StatusRequest{})
	if err != nil {
		t.Fatalf("status: %v", err)
	}
	return tableState{st.GetLastToken(), st.GetLocksHeld(), st.GetAppliedIndex()}
}

func validKey(k string) bool   { return len(k) >= 1 && validText(k, maxKeyBytes) }
func validOwner(o string) bool { return validText(o, maxOwnerBytes) }

// validText restates docs/api.md's rules for keys and owners: at most
// maxBytes of UTF-8 without control characters or line and paragraph
// separators. Invisible formatting characters (Unicode Cf) are refused or
// not one by one (zero-width space no, joiner yes): judgedText leaves
// inputs with any of them unjudged.
func validText(s string, maxBytes int) bool {
	if len(s) > maxBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if unicode.IsControl(r) || unicode.In(r, unicode.Zl, unicode.Zp) {
			return false
		}
	}
	return true
}

// judgedText reports whether validText's verdict on s is the whole rule.
func judgedText(s string) bool {
	for _, r := range s {
		if unicode.Is(unicode.Cf, r) {
			return false
		}
	}
	return true
}
func validLease(ms int64) bool   { return ms >= minLeaseMS && ms <= maxLeaseMS }
func validToken(tok uint64) bool { return tok != 0 }

// holderFields spreads the fuzzer's token over an Acquire's holder fields:
// mode (its low 2 bits: 0 exclusive, 1 shared, 2 and 3 no such
// mode), limit (the next 13 bits, up to 8191: above 4096 is refused) and
// session (the bits above, mostly 0 or unknown).
func holderFields(token uint64) (ticketv1.Mode, uint32, uint64) {
	return ticketv1.Mode(token & 3), uint32(token>>2) & 0x1fff, token >> 15
}

// validMode restates docs/api.md: a known mode, a limit of at most
// maxLimit, and no limit with the shared mode.
func validMode(m ticketv1.Mode, limit uint32) bool {
	return (m == ticketv1.Mode_MODE_EXCLUSIVE || m == ticketv1.Mode_MODE_SHARED) && limit <= maxLimit &&
		!(m == ticketv1.Mode_MODE_SHARED && limit > 0)
}

// Operations of FuzzLockRequests.
const (
	opAcquire = iota
	opRelease
	opRenew
	opGet
	opCheckToken
	opList
	// An Acquire with mode, limit and session (holderFields of
	// the token), and the session calls (n is the TTL, token the session).
	opAcquireHolder
	opCreateSession
	opKeepAlive
	opCloseSession
	numOps
)

// FuzzLockRequests sends one typed LockService request built from the
// inputs and checks the validation promises of docs/api.md#errors: out-of-bounds input is
// InvalidArgument and changes nothing; in-bounds input is never
// InvalidArgument; nothing is Internal or Unknown.
func FuzzLockRequests(f *testing.F) {
	f.Add(uint8(opAcquire), "k", int64(1000), "owner", uint64(0))
	f.Add(uint8(opAcquire), "", int64(1000), "owner", uint64(0))
	f.Add(uint8(opAcquire), "k", int64(99), "owner", uint64(0))
	f.Add(uint8(opAcquire), "k", int64(600_001), "", uint64(0))
	f.Add(uint8(opAcquire), "k", int64(-5), "o", uint64(0))
	f.Add(uint8(opAcquire), string(bytes.Repeat([]byte("k"), 1025)), int64(1000), "o", uint64(0))
	f.Add(uint8(opAcquire), "k", int64(1000), string(bytes.Repeat([]byte("o"), 129)), uint64(0))
	f.Add(uint8(opRelease), "k", int64(0), "", uint64(0))
	f.Add(uint8(opRelease), "k", int64(0), "", uint64(7))
	f.Add(uint8(opRenew), "k", int64(0), "", uint64(0))
	f.Add(uint8(opGet), "", int64(0), "", uint64(0))
	f.Add(uint8(opCheckToken), "k", int64(0), "", uint64(0))
	f.Add(uint8(opCheckToken), "k", int64(0), "", uint64(1<<63))
	f.Add(uint8(opList), "p", int64(-1), "tok", uint64(0))
	f.Add(uint8(opList), string(bytes.Repeat([]byte("p"), 1025)), int64(10), "", uint64(0))
	f.Add(uint8(opAcquireHolder), "rw", int64(1000), "o", uint64(1))        // shared
	f.Add(uint8(opAcquireHolder), "sem", int64(1000), "o", uint64(3<<2))    // a semaphore of 3
	f.Add(uint8(opAcquireHolder), "sem", int64(1000), "o", uint64(3<<2|1))  // shared with a limit
	f.Add(uint8(opAcquireHolder), "sem", int64(1000), "o", uint64(4097<<2)) // a limit too large
	f.Add(uint8(opAcquireHolder), "k", int64(1000), "o", uint64(2))         // no such mode
	f.Add(uint8(opAcquireHolder), "k", int64(0), "o", uint64(12345)<<15)    // an unknown session
	f.Add(uint8(opCreateSession), "", int64(1000), "", uint64(0))
	f.Add(uint8(opCreateSession), "", int64(99), "", uint64(0))
	f.Add(uint8(opCreateSession), "", int64(600_001), "", uint64(0))
	f.Add(uint8(opKeepAlive), "", int64(0), "", uint64(0))
	f.Add(uint8(opKeepAlive), "", int64(0), "", uint64(1<<40))
	f.Add(uint8(opCloseSession), "", int64(0), "", uint64(0))
	f.Add(uint8(opCloseSession), "", int64(0), "", uint64(77))
	f.Fuzz(func(t *testing.T, op uint8, key string, n int64, owner string, token uint64) {
		if !utf8.ValidString(key) || !utf8.ValidString(owner) {
			t.Skip("the generated client cannot marshal invalid UTF-8; FuzzRawRequests covers it")
		}
		nd := getNode(t)
		before := nd.state(t)
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		var valid bool
		judge := true // whether valid is known for this input
		var err error
		switch op % numOps {
		case opAcquire:
			valid = validKey(key) && validLease(n) && validOwner(owner)
			var res *ticketv1.AcquireResponse
			res, err = nd.lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: n, Owner: owner})
			if err == nil {
				// Leave the table as it was: release what was granted.
				if _, rerr := nd.lock.Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: res.GetToken()}); rerr != nil {
					t.Fatalf("release of a fresh grant: %v", rerr)
				}
			}
		case opRelease:
			valid = validKey(key) && validToken(token)
			_, err = nd.lock.Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: token})
		case opRenew:
			valid = validKey(key) && validToken(token)
			_, err = nd.lock.Renew(ctx, &ticketv1.RenewRequest{Key: key, Token: token})
		case opGet:
			valid = validKey(key)
			_, err = nd.lock.GetLock(ctx, &ticketv1.GetLockRequest{Key: key, Stale: token%2 == 1})
		case opCheckToken:
			valid = validKey(key) && validToken(token)
			_, err = nd.lock.CheckToken(ctx, &ticketv1.CheckTokenRequest{Key: key, Token: token})
		case opList:
			// page_size must be ≥ 0 and the prefix at most a key long; a
			// made-up page token may be refused either way, so it is not judged.
			size := int32(n)
			_, err = nd.lock.ListLocks(ctx, &ticketv1.ListLocksRequest{Prefix: key, PageSize: size, PageToken: owner})
			valid = size >= 0 && len(key) <= maxKeyBytes
			judge = owner == ""
		case opAcquireHolder:
			mode, limit, session := holderFields(token)
			valid = validKey(key) && validOwner(owner) && validMode(mode, limit) && (validLease(n) || session != 0)
			// Under a session lease_ms is ignored: whether a bad one is
			// refused first is not promised.
			judge = validLease(n) || session == 0
			var res *ticketv1.AcquireResponse
			res, err = nd.lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: n, Owner: owner, Mode: mode, Limit: limit, Session: session})
			if err == nil {
				if _, rerr := nd.lock.Release(ctx, &ticketv1.ReleaseRequest{Key: key, Token: res.GetToken()}); rerr != nil {
					t.Fatalf("release of a fresh grant: %v", rerr)
				}
			}
		case opCreateSession:
			valid = validLease(n)
			var res *ticketv1.CreateSessionResponse
			res, err = nd.lock.CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: n})
			if err == nil {
				if _, cerr := nd.lock.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: res.GetSession()}); cerr != nil {
					t.Fatalf("close of a fresh session: %v", cerr)
				}
			}
		case opKeepAlive:
			valid = token != 0
			_, err = nd.lock.KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: token})
		case opCloseSession:
			valid = token != 0
			_, err = nd.lock.CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: token})
		}
		judge = judge && judgedText(key) && judgedText(owner)
		code := connect.CodeOf(err)
		if code == connect.CodeUnimplemented && op%numOps >= opAcquireHolder {
			t.Skip("this server does not serve sessions yet")
		}
		if err != nil && (code == connect.CodeInternal || code == connect.CodeUnknown) {
			t.Fatalf("op %d key %q n %d owner %q token %d: %v", op%numOps, key, n, owner, token, err)
		}
		if !judge {
			return
		}
		if !valid {
			if code != connect.CodeInvalidArgument {
				t.Fatalf("op %d key %q n %d owner %q token %d: got %v, want InvalidArgument", op%numOps, key, n, owner, token, err)
			}
			if after := nd.state(t); after != before {
				t.Fatalf("op %d: a refused request changed the table: %+v -> %+v", op%numOps, before, after)
			}
			return
		}
		if code == connect.CodeInvalidArgument {
			t.Fatalf("op %d key %q n %d owner %q token %d: valid input refused: %v", op%numOps, key, n, owner, token, err)
		}
	})
}

// procedures are the LockService procedures FuzzRawRequests posts to.
var procedures = []string{
	ticketv1connect.LockServiceAcquireProcedure,
	ticketv1connect.LockServiceReleaseProcedure,
	ticketv1connect.LockServiceRenewProcedure,
	ticketv1connect.LockServiceGetLockProcedure,
	ticketv1connect.LockServiceListLocksProcedure,
	ticketv1connect.LockServiceCheckTokenProcedure,
	ticketv1connect.LockServiceCreateSessionProcedure,
	ticketv1connect.LockServiceKeepAliveProcedure,
	ticketv1connect.LockServiceCloseSessionProcedure,
}

// FuzzRawRequests posts arbitrary bytes as the body of a unary Connect call
// (application/proto or application/json) to each LockService procedure: the
// server must answer with a Connect error other than Internal or Unknown, or
// a response, and keep serving.
func FuzzRawRequests(f *testing.F) {
	f.Add(uint8(0), false, []byte{})
	f.Add(uint8(0), false, []byte{0x0a, 0x01, 'k', 0x10, 0xe8, 0x07})
	f.Add(uint8(0), true, []byte(`{"key":"k","leaseMs":"1000","owner":"o"}`))
	f.Add(uint8(1), true, []byte(`{"key":"k","token":"18446744073709551615"}`))
	f.Add(uint8(2), true, []byte(`{"key":"k","token":-1}`))
	f.Add(uint8(3), false, []byte{0xff, 0xff, 0xff})
	f.Add(uint8(4), true, []byte(`{"pageSize":-3,"pageToken":"!!"}`))
	f.Add(uint8(5), true, []byte(`not json`))
	f.Add(uint8(0), false, []byte{0x0a, 0x80, 0x80, 0x80, 0x80, 0x10})
	f.Add(uint8(0), false, []byte{0x0a, 0x02, 0xff, 0xfe, 0x10, 0xe8, 0x07})                  // key is not UTF-8
	f.Add(uint8(0), false, []byte{0x0a, 0x01, 'k', 0x10, 0xe8, 0x07, 0x22, 0x02, 0xc3, 0x28}) // owner is not UTF-8
	f.Add(uint8(0), true, []byte(`{"key":"k","leaseMs":"1000","owner":"o","mode":"MODE_SHARED","limit":3}`))
	f.Add(uint8(0), true, []byte(`{"key":"k","leaseMs":"1000","owner":"o","mode":7,"limit":4294967295}`))
	f.Add(uint8(0), true, []byte(`{"key":"k","owner":"o","session":"18446744073709551615"}`))
	f.Add(uint8(6), true, []byte(`{"ttlMs":"-1"}`))
	f.Add(uint8(6), false, []byte{0x08, 0xe8, 0x07})
	f.Add(uint8(7), true, []byte(`{"session":"0"}`))
	f.Add(uint8(8), true, []byte(`{"session":"12"}`))
	f.Fuzz(func(t *testing.T, proc uint8, asJSON bool, body []byte) {
		nd := getNode(t)
		ct := "application/proto"
		if asJSON {
			ct = "application/json"
		}
		p := procedures[int(proc)%len(procedures)]
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(ctx, http.MethodPost, nd.url+p, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", ct)
		req.Header.Set("Connect-Protocol-Version", "1")
		start := time.Now()
		resp, err := nd.http.Do(req)
		if err != nil {
			t.Fatalf("%s %s %q: no answer after %v: %v", p, ct, body, time.Since(start), err)
		}
		out, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode >= 500 && resp.StatusCode != http.StatusServiceUnavailable && resp.StatusCode != http.StatusGatewayTimeout {
			t.Fatalf("%s %s %q: HTTP %d %s", p, ct, body, resp.StatusCode, out)
		}
		for _, bad := range []string{`"code":"internal"`, `"code":"unknown"`} {
			if bytes.Contains(out, []byte(bad)) {
				t.Fatalf("%s %s %q: %s", p, ct, body, out)
			}
		}
		// A granted lock is released so the table stays small and free.
		if p == ticketv1connect.LockServiceAcquireProcedure && resp.StatusCode == http.StatusOK {
			cleanup(t, nd)
		}
		sctx, scancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer scancel()
		if _, err := nd.cluster.Status(sctx, &ticketv1.StatusRequest{}); err != nil {
			t.Fatalf("server stopped serving after %s %q: %v", p, body, err)
		}
	})
}

// cleanup releases every holder of every held key, so that a later waiting
// Acquire of the same key does not wait for a lease a raw Acquire was granted.
func cleanup(t *testing.T, nd *node) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	res, err := nd.lock.ListLocks(ctx, &ticketv1.ListLocksRequest{PageSize: 1000})
	if err != nil {
		t.Fatalf("list locks: %v", err)
	}
	for _, lk := range res.GetLocks() {
		tokens := []uint64{lk.GetToken()}
		if len(lk.GetHolders()) > 0 {
			tokens = tokens[:0]
			for _, h := range lk.GetHolders() {
				tokens = append(tokens, h.GetToken())
			}
		}
		for _, tok := range tokens {
			_, err := nd.lock.Release(ctx, &ticketv1.ReleaseRequest{Key: lk.GetKey(), Token: tok})
			if err != nil && connect.CodeOf(err) != connect.CodeNotFound {
				t.Fatalf("release %q token %d: %v", lk.GetKey(), tok, err)
			}
		}
	}
}
