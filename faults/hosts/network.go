//go:build linux

package hosts

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"sync/atomic"
)

// Subnet is the private /24 of every Network. It exists only inside the
// namespaces a Network creates, and each Network has a bridge of its own,
// so concurrent runs never see each other's addresses and nothing routes
// out of them.
const Subnet = "10.213.0.0/24"

// subnetBase is Subnet's first three octets.
const subnetBase = "10.213.0."

// firstHostOctet is the last octet of the first node address; the client
// namespace takes clientOctet.
const (
	clientOctet    = 2
	firstHostOctet = 11
)

// networkSeq numbers the Networks of this process.
var networkSeq atomic.Int64

// Host is one namespace attached to a Network's bridge: a machine with one
// interface (eth0) and one address on Subnet.
type Host struct {
	// Name is the namespace name (td-<pid>-<seq>-h<i>).
	Name string
	// port is the name of its veth end on the bridge (h<i>).
	port string

	mu   sync.Mutex
	addr string
}

// Addr returns the host's current IPv4 address (no port).
func (h *Host) Addr() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.addr
}

// Network is a set of Hosts joined by a bridge in a namespace of its own,
// plus a client namespace the test process dials from. Its methods are safe
// for concurrent use. Close removes every namespace it created.
type Network struct {
	prefix string
	bridge string
	client *Host
	dialer *nsDialer

	mu         sync.Mutex
	hosts      []*Host
	nextOctet  int
	blocked    map[block]bool
	down       map[*Host]bool
	closed     bool
	unregister func()
}

// block is a blackhole route in from's namespace for the address to.
type block struct {
	from *Host
	to   string
}

// NewNetwork creates the bridge and client namespaces of a new Network,
// after sweeping namespaces left by dead runs. Errors wrap ErrUnsupported
// when the machine cannot do it (see Skip), or carry the failing `ip`
// command; whatever was created before an error is removed.
func NewNetwork() (*Network, error) {
	if err := supported(); err != nil {
		return nil, err
	}
	sweepStale()
	n := &Network{
		prefix:    fmt.Sprintf("%s%d-%d-", namePrefix, os.Getpid(), networkSeq.Add(1)),
		nextOctet: firstHostOctet,
		blocked:   map[block]bool{},
		down:      map[*Host]bool{},
	}
	n.bridge = n.prefix + "br"
	n.unregister = register(func() { _ = n.teardown() })
	if err := n.setup(); err != nil {
		return nil, errors.Join(err, n.Close())
	}
	return n, nil
}

func (n *Network) setup() error {
	if err := addNS(n.bridge); err != nil {
		return err
	}
	if err := ip("-n", n.bridge, "link", "add", "br0", "type", "bridge"); err != nil {
		return err
	}
	if err := ip("-n", n.bridge, "link", "set", "br0", "up"); err != nil {
		return err
	}
	c, err := n.attach(n.prefix+"cl", "cl", subnetBase+fmt.Sprint(clientOctet))
	if err != nil {
		return err
	}
	n.client = c
	n.dialer, err = newNSDialer(c.Name)
	return err
}

// attach creates namespace name, a veth pair eth0 (in it, with addr) and
// port (on the bridge), and brings both up.
func (n *Network) attach(name, port, addr string) (*Host, error) {
	if err := addNS(name); err != nil {
		return nil, err
	}
	h := &Host{Name: name, port: port, addr: addr}
	steps := [][]string{
		{"-n", name, "link", "add", "eth0", "type", "veth", "peer", "name", port, "netns", n.bridge},
		{"-n", n.bridge, "link", "set", port, "master", "br0"},
		{"-n", n.bridge, "link", "set", port, "up"},
		{"-n", name, "addr", "add", addr + "/24", "dev", "eth0"},
		{"-n", name, "link", "set", "eth0", "up"},
	}
	for _, s := range steps {
		if err := ip(s...); err != nil {
			return h, err
		}
	}
	return h, nil
}

// freeAddr returns the next unused address of Subnet.
func (n *Network) freeAddr() (string, error) {
	if n.nextOctet > 254 {
		return "", ErrAddresses
	}
	a := subnetBase + fmt.Sprint(n.nextOctet)
	n.nextOctet++
	return a, nil
}

// AddHost creates a new host namespace with a fresh address on the bridge.
func (n *Network) AddHost() (*Host, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	addr, err := n.freeAddr()
	if err != nil {
		return nil, err
	}
	h, err := n.attach(fmt.Sprintf("%sh%d", n.prefix, len(n.hosts)), fmt.Sprintf("h%d", len(n.hosts)), addr)
	if h != nil {
		n.hosts = append(n.hosts, h)
	}
	return h, err
}

// Readdress gives h a fresh address in place of its current one (a host
// that comes back with a new DHCP lease) and returns it. Connections to or
// from the old address die.
func (n *Network) Readdress(h *Host) (string, error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	addr, err := n.freeAddr()
	if err != nil {
		return "", err
	}
	if err := ip("-n", h.Name, "addr", "flush", "dev", "eth0"); err != nil {
		return "", err
	}
	if err := ip("-n", h.Name, "addr", "add", addr+"/24", "dev", "eth0"); err != nil {
		return "", err
	}
	h.mu.Lock()
	h.addr = addr
	h.mu.Unlock()
	return addr, nil
}

// Down sets h's link down on the bridge: h can reach no one and no one,
// clients included, can reach it (a pulled cable).
func (n *Network) Down(h *Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	if err := ip("-n", n.bridge, "link", "set", h.port, "down"); err != nil {
		return err
	}
	n.down[h] = true
	return nil
}

// Up sets h's link up again after Down.
func (n *Network) Up(h *Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.up(h)
}

func (n *Network) up(h *Host) error {
	if err := ip("-n", n.bridge, "link", "set", h.port, "up"); err != nil {
		return err
	}
	delete(n.down, h)
	return nil
}

// Block adds a blackhole route for to's address in from's namespace: every
// packet from sends to to is dropped, while to's packets still reach from
// (one-way loss). A TCP connection needs both directions, so it stalls
// either way; datagrams from to still arrive. Blocking twice is a no-op.
func (n *Network) Block(from, to *Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	b := block{from: from, to: to.Addr()}
	if n.blocked[b] {
		return nil
	}
	if err := ip("-n", from.Name, "route", "add", "blackhole", b.to+"/32"); err != nil {
		return err
	}
	n.blocked[b] = true
	return nil
}

// UnblockLink removes the blackhole route Block added.
func (n *Network) UnblockLink(from, to *Host) error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unblock(block{from: from, to: to.Addr()})
}

func (n *Network) unblock(b block) error {
	if !n.blocked[b] {
		return nil
	}
	if err := ip("-n", b.from.Name, "route", "del", "blackhole", b.to+"/32"); err != nil {
		return err
	}
	delete(n.blocked, b)
	return nil
}

// Isolate cuts h from each of peers in both directions (h itself in peers
// is ignored) and leaves every other path, the clients' included, intact:
// the leader cut from its followers but reachable by clients.
func (n *Network) Isolate(h *Host, peers ...*Host) error {
	for _, p := range peers {
		if p == h {
			continue
		}
		if err := errors.Join(n.Block(h, p), n.Block(p, h)); err != nil {
			return err
		}
	}
	return nil
}

// Unblock removes every blackhole route (links set down stay down).
func (n *Network) Unblock() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.unblockAll()
}

func (n *Network) unblockAll() error {
	var errs []error
	for b := range n.blocked {
		errs = append(errs, n.unblock(b))
	}
	return errors.Join(errs...)
}

// Heal removes every blackhole route and sets every link up.
func (n *Network) Heal() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	errs := []error{n.unblockAll()}
	for h := range n.down {
		errs = append(errs, n.up(h))
	}
	return errors.Join(errs...)
}

// Faults describes the faults in effect, sorted, for logs: "down h1",
// "block h0->10.213.0.12".
func (n *Network) Faults() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	var out []string
	for h := range n.down {
		out = append(out, "down "+h.port)
	}
	for b := range n.blocked {
		out = append(out, "block "+b.from.port+"->"+b.to)
	}
	sort.Strings(out)
	return out
}

// DialContext connects to address from the client namespace; it has the
// signature of net.Dialer.DialContext, for http.Transport.
func (n *Network) DialContext(ctx context.Context, network, address string) (net.Conn, error) {
	return n.dialer.DialContext(ctx, network, address)
}

// Close kills every process left in the Network's namespaces and deletes
// them. It is idempotent.
func (n *Network) Close() error {
	n.mu.Lock()
	if n.closed {
		n.mu.Unlock()
		return nil
	}
	n.closed = true
	n.mu.Unlock()
	n.unregister()
	return n.teardown()
}

// teardown deletes every namespace of n, hosts first, then the bridge.
func (n *Network) teardown() error {
	n.mu.Lock()
	names := make([]string, 0, len(n.hosts)+2)
	for _, h := range n.hosts {
		names = append(names, h.Name)
	}
	n.mu.Unlock()
	names = append(names, n.prefix+"cl", n.bridge)
	if n.dialer != nil {
		n.dialer.Close()
	}
	var errs []error
	for _, name := range names {
		if nsExists(name) {
			errs = append(errs, delNS(name))
		}
	}
	return errors.Join(errs...)
}
