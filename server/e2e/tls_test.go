package e2e_test

import (
	"crypto/tls"
	"errors"
	"net"
	"path/filepath"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk"
	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// TestSecureCluster runs three real nodes with client TLS, client-cert auth
// and peer mutual TLS: locks through the SDK and through a follower
// (forwarding over TLS), refusals of clients without the right certificate,
// refused unsafe membership changes, and a leader kill.
func TestSecureCluster(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		dir := makeCerts(t, 3, "e2e", "orders-svc")
		c := ticketdtest.Start(t, ticketdtest.Options{
			Backend: backend,
			Args:    []string{"--lease-min-ms=10", "--lease-max-ms=120000"},
			TLS:     &ticketdtest.TLS{CertsDir: dir, ClientCertAuth: true, Peer: true, Client: "e2e"},
		})
		settle(t, c)
		ctx := ctxT(t)
		var eps []string
		for i := range c.Len() {
			eps = append(eps, c.Node(i).APIAddr)
		}
		cli, err := sdk.New(eps, sdk.WithTLS(c.TLSConfig()))
		require.NoError(t, err)
		defer cli.Close()

		t.Run("sdk_lock_unlock", func(t *testing.T) {
			l, err := cli.TryLock(ctx, "secure/a", 10*time.Second)
			require.NoError(t, err)
			require.NoError(t, l.Unlock(ctx))
		})
		leader := c.Leader(t)
		follower := (leader + 1) % c.Len()
		t.Run("forwarded_over_tls", func(t *testing.T) {
			res, err := c.Lock(follower).Acquire(ctx, &ticketv1.AcquireRequest{Key: "secure/fwd", LeaseMs: 10_000, Owner: "o"})
			require.NoError(t, err)
			_, err = c.Lock(follower).Release(ctx, &ticketv1.ReleaseRequest{Key: "secure/fwd", Token: res.GetToken()})
			require.NoError(t, err)
		})
		t.Run("client_without_cert_refused", func(t *testing.T) {
			noCert := c.TLSConfig().Clone()
			noCert.Certificates = nil
			lc := ticketv1connect.NewLockServiceClient(ticketdtest.TLSClient(noCert), c.URL(leader))
			_, err := lc.Acquire(ctx, &ticketv1.AcquireRequest{Key: "secure/nocert", LeaseMs: 10_000, Owner: "x"})
			require.Error(t, err)
		})
		t.Run("plaintext_client_refused", func(t *testing.T) {
			lc := ticketv1connect.NewLockServiceClient(ticketdtest.H2CClient(), "http://"+c.Node(leader).APIAddr)
			_, err := lc.Acquire(ctx, &ticketv1.AcquireRequest{Key: "secure/plain", LeaseMs: 10_000, Owner: "x"})
			require.Error(t, err)
		})
		t.Run("untrusted_server_refused_by_client", func(t *testing.T) {
			other := makeCerts(t, 0)
			otherTLS, err := (&ticketdtest.TLS{CertsDir: other}).ClientConfig()
			require.NoError(t, err)
			otherTLS.Certificates = c.TLSConfig().Certificates
			lc := ticketv1connect.NewLockServiceClient(ticketdtest.TLSClient(otherTLS), c.URL(leader))
			_, err = lc.GetLock(ctx, &ticketv1.GetLockRequest{Key: "secure/a"})
			require.Error(t, err)
		})
		t.Run("peer_port_refuses_non_node_certs", func(t *testing.T) {
			client := c.TLSConfig().Clone() // the e2e client certificate: client auth only
			client.ServerName = "127.0.0.1"
			none := client.Clone()
			none.Certificates = nil
			// Control: the peer port speaks TLS 1.3 to a node certificate.
			node, err := tls.LoadX509KeyPair(filepath.Join(dir, "node-n1.crt"), filepath.Join(dir, "node-n1.key"))
			require.NoError(t, err)
			ok := client.Clone()
			ok.Certificates = []tls.Certificate{node}
			conn, err := tls.Dial("tcp", c.Node(leader).RaftAddr, ok)
			require.NoError(t, err, "peer port with a node certificate")
			assert.Equal(t, uint16(tls.VersionTLS13), conn.ConnectionState().Version)
			conn.Close()
			for name, cfg := range map[string]*tls.Config{"client_cert": client, "no_cert": none} {
				conn, err := tls.Dial("tcp", c.Node(leader).RaftAddr, cfg)
				if err != nil {
					continue // refused during the handshake
				}
				_ = conn.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err = conn.Read(make([]byte, 1))
				conn.Close()
				require.Error(t, err, name)
				var ne net.Error
				assert.False(t, errors.As(err, &ne) && ne.Timeout(), "%s: the peer port kept a connection without a node certificate", name)
			}
		})
		t.Run("dead_voter_refused", func(t *testing.T) {
			before, err := c.Status(leader)
			require.NoError(t, err)
			_, err = c.Cluster(leader).AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{
				Id: "n9", RaftAddr: ticketdtest.FreeAddr(t), ApiAddr: ticketdtest.FreeAddr(t), Voter: true}})
			requireCode(t, connect.CodeFailedPrecondition, err)
			after, err := c.Status(leader)
			require.NoError(t, err)
			assert.Len(t, after.GetMembers(), len(before.GetMembers()), "membership unchanged")
		})
		t.Run("leader_address_rewrite_refused", func(t *testing.T) {
			st, err := c.Status(leader)
			require.NoError(t, err)
			// Point the leader's api_addr at another member (a server that
			// answers, but not as the leader).
			_, err = c.Cluster(leader).AddMember(ctx, &ticketv1.AddMemberRequest{Member: &ticketv1.Member{
				Id: c.Node(leader).ID, RaftAddr: c.Node(leader).RaftAddr, ApiAddr: c.Node(follower).APIAddr, Voter: true}})
			requireCode(t, connect.CodeFailedPrecondition, err)
			now, err := c.Status(leader)
			require.NoError(t, err)
			assert.Equal(t, st.GetLeaderAddr(), now.GetLeaderAddr(), "the leader's address is unchanged")
		})
		t.Run("leader_kill", func(t *testing.T) {
			l, err := cli.TryLock(ctx, "secure/survives", 20*time.Second)
			require.NoError(t, err)
			c.Kill(leader)
			nl := c.WaitLeader(t, safety)
			require.NotEqual(t, leader, nl)
			got, err := c.Lock(nl).GetLock(ctx, &ticketv1.GetLockRequest{Key: "secure/survives"})
			require.NoError(t, err)
			assert.Equal(t, l.Token(), got.GetToken(), "the lock survives on the new leader")
			l2, err := cli.TryLock(ctx, "secure/after", 10*time.Second)
			require.NoError(t, err, "the SDK fails over over https")
			require.NoError(t, l2.Unlock(ctx))
			require.NoError(t, l.Unlock(ctx))
		})
	})
}
