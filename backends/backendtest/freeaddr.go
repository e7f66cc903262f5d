package backendtest

import (
	"math/rand/v2"
	"net"
	"strconv"
	"sync"
	"testing"
)

// FreeAddr returns a loopback host:port that was free a moment ago, for a
// peer to bind later, and never one it returned before in this process
// (two peers of one cluster must never share one).
//
// The port comes from below the kernel's ephemeral range (Linux's default
// ip_local_port_range is 32768-60999). A port from listen("127.0.0.1:0")
// is an ephemeral one, which an outgoing connection of any process may take
// as its source port between the pick and the peer's bind ("bind: address
// already in use" on a busy machine); ports below the range are never
// handed out that way. A random start spreads concurrent test processes
// apart.
//
// A port another test process claimed (reservePort) is skipped.
//
// sdk/ticketdtest.PickAddrs picks the API clusters' ports by the same rule;
// the backends module may not import sdk (docs/design.md#modules), and no
// module both import holds I/O, hence this short copy of the rule.
func FreeAddr(t testing.TB) string {
	t.Helper()
	handedOut.Lock()
	defer handedOut.Unlock()
	for range 20000 {
		port := lowPortMin + rand.IntN(lowPortMax-lowPortMin)
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if handedOut.addrs[addr] || !reservePort(port) {
			continue
		}
		l, err := net.Listen("tcp", addr)
		if err != nil {
			continue // in use
		}
		_ = l.Close()
		handedOut.addrs[addr] = true
		return addr
	}
	t.Fatalf("backendtest: no free port in [%d, %d)", lowPortMin, lowPortMax)
	return ""
}

// The range FreeAddr picks from: [lowPortMin, lowPortMax), below Linux's
// default ephemeral range and above most services' ports.
const (
	lowPortMin = 20000
	lowPortMax = 32768
)

// handedOut holds every address FreeAddr returned in this process.
var handedOut = struct {
	sync.Mutex
	addrs map[string]bool
}{addrs: map[string]bool{}}
