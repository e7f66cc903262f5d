package backendtest

import (
	"context"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// PeerFlood is a stranger's flood of idle TCP connections to a node's peer
// port (docs/security.md#peer-transport-bounds; uncapped, 20,000 of them
// exhausted the node's file descriptors): each connection sends nothing, and a
// goroutine per connection waits for the server to close it.
type PeerFlood struct {
	conns  []net.Conn
	failed int          // dials refused
	closed atomic.Int64 // dialled connections the server closed
	wg     sync.WaitGroup
}

// FloodPeerPort opens n plaintext TCP connections to addr, writes hello on
// each (nil: nothing), then holds them idle until the test ends, and counts
// those the server closes. A dial that fails counts as closed (the
// listener's backlog refused it). Connections are dialled one after
// another, so the server accepts them in order.
func FloodPeerPort(t testing.TB, addr string, n int, hello []byte) *PeerFlood {
	t.Helper()
	f := &PeerFlood{}
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			f.failed++
			continue
		}
		f.conns = append(f.conns, c)
		if len(hello) > 0 {
			_, _ = c.Write(hello) // a refused connection may be closed already
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			buf := make([]byte, 512)
			for {
				if _, err := c.Read(buf); err != nil {
					f.closed.Add(1)
					return
				}
			}
		}()
	}
	t.Cleanup(func() {
		for _, c := range f.conns {
			_ = c.Close()
		}
		f.wg.Wait()
	})
	return f
}

// Open returns how many of the flood's connections the server still holds.
func (f *PeerFlood) Open() int { return len(f.conns) - int(f.closed.Load()) }

// Total returns the number of connections attempted.
func (f *PeerFlood) Total() int { return len(f.conns) + f.failed }

// Closed returns how many of the flood's connections ended: closed by the
// server, or refused at the dial.
func (f *PeerFlood) Closed() int { return int(f.closed.Load()) + f.failed }

// refusalCounter is a backends.PeerObserver that counts the peer transport
// errors of each kind (the timings are ignored).
type refusalCounter struct {
	mu    sync.Mutex
	kinds map[string]int
}

func (o *refusalCounter) LogAppended(int, time.Duration)             {}
func (o *refusalCounter) SnapshotTaken(int64, time.Duration)         {}
func (o *refusalCounter) Proposed(time.Duration)                     {}
func (o *refusalCounter) Applied(int, time.Duration)                 {}
func (o *refusalCounter) FollowerProgress(string, uint64, time.Time) {}

func (o *refusalCounter) PeerTransportError(_, kind string) {
	o.mu.Lock()
	defer o.mu.Unlock()
	o.kinds[kind]++
}

func (o *refusalCounter) count(kind string) int {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.kinds[kind]
}

// Settings of RunPeerFlood.
const (
	floodConns     = 2000
	floodCapPerIP  = 24
	floodCapTotal  = 32
	floodIdleScale = 3 // PeerIdleTimeout = 3 × ElectionTimeout
)

// HTTP2Hello is what a stranger sends on an idle HTTP/2 cleartext
// connection: the client preface and an empty SETTINGS frame, after which
// the server waits for a stream (the etcd backend's peer port).
var HTTP2Hello = append([]byte("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), 0, 0, 0, 4, 0, 0, 0, 0, 0)

// RunPeerFlood runs the idle-connection flood against a backend:
// a stranger opens floodConns idle connections to a follower's peer port,
// plaintext (each sends hello first, e.g. HTTP2Hello, then nothing) or with
// the peer port under mutual TLS (the stranger then never starts a
// handshake). With MaxPeerConns and MaxPeerConnsPerIP low, the
// follower must hold at most the cap of them and count the refusals
// ("refused"), keep applying what the leader commits meanwhile, close every
// flood connection once PeerIdleTimeout (3 × ElectionTimeout here) has
// passed, and never lose the leader's own connections to it: the term is
// unchanged at the end, so neither the heartbeats nor the replication
// stream were cut by the idle deadline.
func RunPeerFlood(t *testing.T, open Factory, hello []byte) {
	for _, tc := range []struct {
		name string
		tls  bool
	}{
		{"plaintext", false},
		{"mutual_tls", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			obs := &refusalCounter{kinds: map[string]int{}}
			c := NewCluster(t, open)
			c.Tune = func(cfg *backends.Config) {
				cfg.MaxPeerConns = floodCapTotal
				cfg.MaxPeerConnsPerIP = floodCapPerIP
				cfg.PeerIdleTimeout = floodIdleScale * ElectionTimeout
				cfg.Observer = obs
			}
			if tc.tls {
				UsePeerTLS(c, NewPKI(t, "ticketd peer CA"))
			}
			c.Start(3)
			l := c.WaitLeader()
			ctx, cancel := context.WithTimeout(context.Background(), WaitTimeout)
			defer cancel()
			if _, err := c.Propose(ctx, core.Grant("before", 60_000, "o")); err != nil {
				t.Fatalf("propose before the flood: %v", err)
			}
			term := l.Node().Status().Term
			victim := c.Followers(l)[0]

			var h []byte
			if !tc.tls {
				h = hello
			}
			f := FloodPeerPort(t, victim.Addr, floodConns, h)
			c.waitFor("the victim to hold at most its cap of the flood", func() bool { return f.Open() <= floodCapPerIP })
			if n := obs.count("refused"); n == 0 {
				t.Error("no refused connection counted")
			}
			for i := range 20 {
				if _, err := c.Propose(ctx, core.Grant(fmt.Sprintf("during-%d", i), 60_000, "o")); err != nil {
					t.Fatalf("propose during the flood: %v", err)
				}
			}
			c.WaitApplied(l.Node().Status().AppliedIndex, victim)

			c.waitFor("every flood connection closed by the idle deadline", func() bool { return f.Open() == 0 })
			if _, err := c.Propose(ctx, core.Grant("after", 60_000, "o")); err != nil {
				t.Fatalf("propose after the flood: %v", err)
			}
			c.WaitApplied(l.Node().Status().AppliedIndex, victim)
			if got := l.Node().Status().Term; got != term || c.Leader() != l {
				t.Errorf("leadership changed during the flood: term %d -> %d", term, got)
			}
			t.Logf("%d connections: %d refused, all closed by the server", f.Total(), obs.count("refused"))
		})
	}
}
