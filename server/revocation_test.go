package server_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"math/big"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/internal/nodetest"
	"github.com/ticketd/ticketd/server/security"
)

// TestRevokedClientRefusedOnAPIPort: a node with client-cert auth and
// client_crl_file refuses, at the TLS handshake, a client certificate the
// list names while serving another; once `ticketctl cert revoke` (Revoke)
// adds the second one, the node reloads the list by itself and refuses it
// too, without a restart.
func TestRevokedClientRefusedOnAPIPort(t *testing.T) {
	t.Parallel()
	p := nodetest.NewPKI(t)
	bob, err := security.CreateClient(p.Dir, "bob", time.Hour, false)
	require.NoError(t, err)
	_, err = security.Revoke(p.Dir, p.Client.Cert.SerialNumber, time.Hour)
	require.NoError(t, err)
	s := nodetest.StartStandalone(t, func(c *config.Config) {
		p.SecureConfig(c)
		c.ClientCRLFile = p.Path(security.CRLFile)
	})
	// acquire calls on a new connection; the error of a refused handshake
	// is the server's TLS alert.
	acquire := func(kp *security.KeyPair, key string) error {
		ctx, cancel := context.WithTimeout(context.Background(), safety)
		defer cancel()
		cfg := &tls.Config{RootCAs: p.Pool(), Certificates: []tls.Certificate{kp.TLS()}}
		lc := ticketv1connect.NewLockServiceClient(nodetest.TLSHTTPClient(cfg, false), "https://"+s.Addr)
		_, err := lc.Acquire(ctx, &ticketv1.AcquireRequest{Key: key, LeaseMs: 10_000, Owner: "o"})
		return err
	}
	// In TLS 1.3 the server checks the client's certificate after the
	// client has sent its Finished, so the client sees either the alert or,
	// when it writes its request before reading the alert, the reset that
	// follows it, or — when the connection ends before the server's HTTP/2
	// SETTINGS arrive — net/http's "client conn could not be established",
	// which does not carry the read error; bob's answer on the same node
	// shows that nothing else cuts connections here.
	refusedAtHandshake := func(err error) bool {
		return err != nil && (strings.Contains(err.Error(), "tls: bad certificate") ||
			strings.Contains(err.Error(), "connection reset by peer") || strings.Contains(err.Error(), "broken pipe") ||
			strings.Contains(err.Error(), "http2: client conn could not be established"))
	}
	err = acquire(p.Client, "crl/revoked")
	require.True(t, refusedAtHandshake(err), "a revoked client certificate is refused: %v", err)
	require.NoError(t, acquire(bob, "crl/bob"), "a certificate the list does not name is served")

	_, err = security.Revoke(p.Dir, bob.Cert.SerialNumber, time.Hour)
	require.NoError(t, err)
	require.Eventually(t, func() bool { return refusedAtHandshake(acquire(bob, "crl/bob-again")) },
		30*time.Second, 100*time.Millisecond, "the extended list is reloaded and applies to new connections")
}

// TestRevokedPeerRefusedOnPeerPort: on each backend, a node with
// peer_crl_file refuses at its peer port's handshake a node certificate
// the list names (an earlier certificate of the node's own id, as after a
// key compromise and re-issue), while its current certificate is accepted.
func TestRevokedPeerRefusedOnPeerPort(t *testing.T) {
	t.Parallel()
	for backend, alpn := range map[string][]string{config.BackendHashicorp: nil, config.BackendEtcd: {"h2"}} {
		t.Run(backend, func(t *testing.T) {
			p := nodetest.NewPKI(t)
			old, err := p.CA.Issue(security.CertOptions{CommonName: "n1", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
			require.NoError(t, err)
			_, err = security.Revoke(p.Dir, old.Cert.SerialNumber, time.Hour)
			require.NoError(t, err)
			current, err := security.LoadKeyPair(p.Path("node-n1.crt"), p.Path("node-n1.key"))
			require.NoError(t, err)
			c := nodetest.Start(t, 1, nodetest.WithBackend(backend), nodetest.WithConfig(func(_ int, c *config.Config) {
				c.PeerCertFile, c.PeerKeyFile = p.Path("node-n1.crt"), p.Path("node-n1.key")
				c.PeerTrustedCAFile, c.PeerCRLFile = p.Path("ca.crt"), p.Path(security.CRLFile)
			}))
			raft := c.Nodes[0].Config.RaftAddr

			require.NoError(t, peerHandshake(t, raft, alpn, p, current), "the current certificate is accepted")
			err = peerHandshake(t, raft, alpn, p, old)
			require.Error(t, err, "the revoked certificate is refused")
		})
	}
}

// peerHandshake dials a peer port with kp as the client certificate and
// reports whether the server refused it (alpn: the protocol to offer; etcd's
// peer port speaks h2, and http/1.1 for its upgraded message streams). In
// TLS 1.3 the client's handshake ends before the server has checked the
// client's certificate, so the answer is read: a refusal arrives as an
// alert (an error that is not a timeout); an accepted connection stays
// silent, waiting for a peer message, until the read deadline (nil).
func peerHandshake(t *testing.T, addr string, alpn []string, p nodetest.PKI, kp *security.KeyPair) error {
	t.Helper()
	cfg := &tls.Config{RootCAs: p.Pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{kp.TLS()},
		MinVersion: tls.VersionTLS13, NextProtos: alpn}
	conn, err := tls.DialWithDialer(&net.Dialer{Timeout: safety}, "tcp", addr, cfg)
	if err != nil {
		return err
	}
	defer conn.Close()
	require.NoError(t, conn.SetReadDeadline(time.Now().Add(2*time.Second)))
	_, err = conn.Read(make([]byte, 1))
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		return nil
	}
	if err == nil {
		return nil // the server spoke first: accepted
	}
	return err
}

// TestRevokedPeerCutOff: on each backend, a three-node cluster on peer
// mutual TLS with peer_crl_file; a follower's certificate is revoked while
// it is stopped. Once the others have reloaded the list, the restarted
// follower gets nothing: its own dials are refused, and the leader's dials
// to it fail at the handshake although the follower accepts the leader:
// the dialer refuses the revoked server certificate. It never applies the
// entries the others commit meanwhile. (hashicorp's leader pushes entries
// over connections it dials, so only the dialer's check keeps them from
// the follower; etcd's leader sends nothing more to a follower whose
// replies never arrive.)
func TestRevokedPeerCutOff(t *testing.T) {
	t.Parallel()
	for _, backend := range []string{config.BackendHashicorp, config.BackendEtcd} {
		t.Run(backend, func(t *testing.T) {
			p := nodetest.NewPKI(t)
			for _, id := range []string{"n2", "n3"} {
				_, err := security.CreateNode(p.Dir, id, []string{"127.0.0.1"}, time.Hour, false)
				require.NoError(t, err)
			}
			_, err := security.Revoke(p.Dir, big.NewInt(1), time.Hour) // a list naming no node yet
			require.NoError(t, err)
			c := nodetest.Start(t, 3, nodetest.WithBackend(backend), nodetest.WithConfig(func(_ int, c *config.Config) {
				c.PeerCertFile, c.PeerKeyFile = p.Path("node-"+c.ID+".crt"), p.Path("node-"+c.ID+".key")
				c.PeerTrustedCAFile, c.PeerCRLFile = p.Path("ca.crt"), p.Path(security.CRLFile)
			}))
			ctx := ctxT(t)
			li := c.WaitLeader(t)
			leader := c.Nodes[li]
			f, other := (li+1)%3, (li+2)%3
			_, err = leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "before", LeaseMs: 60_000})
			require.NoError(t, err)
			require.Eventually(t, func() bool { return state(t, c.Nodes[f]) == state(t, leader) },
				safety, 50*time.Millisecond, "the follower caught up before its revocation")

			revoked, err := security.LoadKeyPair(p.Path("node-"+c.Nodes[f].ID+".crt"), p.Path("node-"+c.Nodes[f].ID+".key"))
			require.NoError(t, err)
			c.Stop(f)
			_, err = security.Revoke(p.Dir, revoked.Cert.SerialNumber, time.Hour)
			require.NoError(t, err)
			for _, i := range []int{li, other} {
				raft := c.Nodes[i].Config.RaftAddr
				alpn := []string(nil)
				if backend == config.BackendEtcd {
					alpn = []string{"h2"}
				}
				require.Eventually(t, func() bool { return peerHandshake(t, raft, alpn, p, revoked) != nil },
					30*time.Second, 100*time.Millisecond, "node %s reloaded the list", c.Nodes[i].ID)
			}
			handshakes := handshakeErrors(t, leader)
			c.Restart(t, f)

			for i := range 5 {
				_, err := leader.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "after-" + strconv.Itoa(i), LeaseMs: 60_000})
				require.NoError(t, err, "the leader and the other follower still commit")
			}
			require.Eventually(t, func() bool { return handshakeErrors(t, leader) > handshakes },
				30*time.Second, 100*time.Millisecond, "the leader's dials to the revoked follower fail at the handshake")
			require.Eventually(t, func() bool { return state(t, c.Nodes[other]) == state(t, leader) },
				safety, 50*time.Millisecond, "the other follower applies")
			got, want := state(t, c.Nodes[f]), state(t, leader)
			require.Less(t, got.AppliedIndex, want.AppliedIndex, "the revoked follower received no entry")
			require.NotEqual(t, want.LastToken, got.LastToken)
		})
	}
}

// handshakeErrors sums a node's ticketd_peer_transport_errors_total of
// kind "handshake" over every peer.
func handshakeErrors(t *testing.T, in *nodetest.Instance) float64 {
	t.Helper()
	res, err := http.Get("http://" + in.Addr + "/metrics")
	require.NoError(t, err)
	defer res.Body.Close()
	sum := 0.0
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, `ticketd_peer_transport_errors_total{kind="handshake"`) {
			continue
		}
		f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		require.NoError(t, err)
		sum += f
	}
	require.NoError(t, sc.Err())
	return sum
}

// TestForwardedPrincipalRefusedFromPeerRevokedCertificate: with one CA and
// only peer_crl_file set (no client_crl_file, so the API's handshake lets
// every certificate of the CA through), a node refuses a request asserting
// a principal (security.PrincipalHeader, what a forwarding follower sends)
// from an earlier certificate of member n1 that the peer list names (a
// stolen key, revoked and re-issued) with Unauthenticated naming the
// revocation, and nothing changes; the member's current certificate
// forwards the same principal and is served as it
// (docs/security.md#forwarding-keeps-the-callers-principal).
func TestForwardedPrincipalRefusedFromPeerRevokedCertificate(t *testing.T) {
	t.Parallel()
	p, stolen, member, s := startWithPeerRevokedKey(t, func(c *config.Config) {
		withSessionAuth(t, c) // alice may lock under s/
	})
	ctx := ctxT(t)
	// forwarding returns a client presenting cert and asserting alice.
	forwarding := func(cert tls.Certificate) ticketv1connect.LockServiceClient {
		cfg := &tls.Config{RootCAs: p.Pool(), Certificates: []tls.Certificate{cert}}
		return ticketv1connect.NewLockServiceClient(nodetest.TLSHTTPClient(cfg, false), "https://"+s.Addr,
			connect.WithInterceptors(connect.UnaryInterceptorFunc(func(next connect.UnaryFunc) connect.UnaryFunc {
				return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
					req.Header().Set(security.PrincipalHeader, "alice")
					return next(ctx, req)
				}
			})))
	}
	thief, node := forwarding(stolen.TLS()), forwarding(member)

	_, err := thief.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/fwd", LeaseMs: 60_000, Owner: "thief"})
	requireCode(t, connect.CodeUnauthenticated, err)
	require.ErrorContains(t, err, "certificate revoked")
	require.ErrorContains(t, err, "peer revocation list")

	// The lock was not taken: the member's forwarded Acquire gets it, and
	// the revoked certificate cannot release it as alice either.
	got, err := node.Acquire(ctx, &ticketv1.AcquireRequest{Key: "s/fwd", LeaseMs: 60_000, Owner: "alice-fwd"})
	require.NoError(t, err, "a member's current certificate forwards alice")
	_, err = thief.Release(ctx, &ticketv1.ReleaseRequest{Key: "s/fwd", Token: got.GetToken()})
	requireCode(t, connect.CodeUnauthenticated, err)
	_, err = node.Renew(ctx, &ticketv1.RenewRequest{Key: "s/fwd", Token: got.GetToken()})
	require.NoError(t, err, "alice's lock is still held")
}

// startWithPeerRevokedKey starts a standalone secure node n1 whose peer
// revocation list (peer_crl_file; client_crl_file unset) names an earlier
// certificate of n1 (stolen: a key compromised, revoked and re-issued), and
// returns the PKI, that certificate, n1's current one (member) and the node;
// edit, when not nil, changes the configuration further.
func startWithPeerRevokedKey(t *testing.T, edit func(*config.Config)) (nodetest.PKI, *security.KeyPair, tls.Certificate, *nodetest.Standalone) {
	t.Helper()
	p := nodetest.NewPKI(t)
	stolen, err := p.CA.Issue(security.CertOptions{CommonName: "n1", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	require.NoError(t, err)
	_, err = security.Revoke(p.Dir, stolen.Cert.SerialNumber, time.Hour)
	require.NoError(t, err)
	member, err := tls.LoadX509KeyPair(p.Path("node-n1.crt"), p.Path("node-n1.key"))
	require.NoError(t, err)
	s := nodetest.StartStandalone(t, func(c *config.Config) {
		p.SecureConfig(c)
		c.PeerCertFile, c.PeerKeyFile, c.PeerTrustedCAFile = p.Path("node-n1.crt"), p.Path("node-n1.key"), p.Path("ca.crt")
		c.PeerCRLFile = p.Path(security.CRLFile)
		if edit != nil {
			edit(c)
		}
	})
	return p, stolen, member, s
}
