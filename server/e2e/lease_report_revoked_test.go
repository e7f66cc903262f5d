package e2e_test

import (
	"context"
	"crypto/tls"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/internal/peerpb"
	"github.com/ticketd/ticketd/server/internal/peerpb/peerpbconnect"
	"github.com/ticketd/ticketd/server/security"
)

// stolenVoter answers PeerService.LeaseRemaining as voter id with every
// lease of key ended (remaining 0), under every seen index up to maxSeen,
// as whoever holds a stolen key of id could without reading the log.
type stolenVoter struct {
	id, key string
	token   uint64
	maxSeen uint64
	calls   atomic.Int32
}

func (s *stolenVoter) LeaseRemaining(_ context.Context, _ *peerpb.LeaseRemainingRequest, stream *connect.ServerStream[peerpb.LeaseRemainingPage]) error {
	s.calls.Add(1)
	page := &peerpb.LeaseRemainingPage{NodeId: s.id}
	for seen := uint64(1); seen <= s.maxSeen; seen++ {
		page.Locks = append(page.Locks, &peerpb.LockLease{Key: s.key, Token: s.token, SeenIndex: seen})
	}
	return stream.Send(page)
}

// TestLeaseReportFromRevokedCertificateRefused: a voter's node key is
// stolen, so the administrator revokes its certificate (`ticketctl cert
// revoke`, --client-crl-file and --peer-crl-file; docs/security.md#revocation).
// The thief waits for that voter to be down, serves its API address with the
// revoked certificate, and answers the next leader's request for the
// voters' measures with every lease ended. The leader must refuse the
// revoked certificate at the handshake, as its peer port would, and keep the
// lock to its lease (docs/design.md#leases: a report shortens a lease only
// if a member's current certificate vouches for it).
func TestLeaseReportFromRevokedCertificateRefused(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		dir := makeCerts(t, 3, "e2e")
		ca, err := security.LoadCA(dir)
		require.NoError(t, err)
		// A second certificate of every member, as a thief of any one of
		// their keys holds, each revoked before the nodes start.
		stolen := map[string]*security.KeyPair{}
		for _, id := range []string{"n1", "n2", "n3"} {
			kp, err := ca.Issue(security.CertOptions{CommonName: id, Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
			require.NoError(t, err)
			_, err = security.Revoke(dir, kp.Cert.SerialNumber, time.Hour)
			require.NoError(t, err)
			stolen[id] = kp
		}
		crl := filepath.Join(dir, security.CRLFile)
		c := ticketdtest.Start(t, ticketdtest.Options{
			Backend: backend,
			Args:    []string{"--client-crl-file", crl, "--peer-crl-file", crl},
			TLS:     &ticketdtest.TLS{CertsDir: dir, ClientCertAuth: true, Peer: true, Client: "e2e"},
		})
		settle(t, c)
		ctx := ctxT(t)
		leader := c.Leader(t)
		victim, next := (leader+1)%c.Len(), (leader+2)%c.Len()
		got, err := c.Lock(leader).Acquire(ctx, &ticketv1.AcquireRequest{Key: "revoked/lock", LeaseMs: 120_000, Owner: "o"})
		require.NoError(t, err)
		st, err := c.Status(leader)
		require.NoError(t, err)

		c.Kill(victim)
		thief := &stolenVoter{id: c.Node(victim).ID, key: "revoked/lock", token: got.GetToken(), maxSeen: st.GetCommitIndex() + 10}
		ln, err := net.Listen("tcp", c.Node(victim).APIAddr)
		require.NoError(t, err)
		mux := http.NewServeMux()
		mux.Handle(peerpbconnect.NewPeerServiceHandler(thief))
		srv := &http.Server{Handler: mux, ErrorLog: log.New(io.Discard, "", 0),
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{stolen[c.Node(victim).ID].TLS()}, NextProtos: []string{"h2", "http/1.1"}}}
		go func() { _ = srv.ServeTLS(ln, "", "") }()
		t.Cleanup(func() { _ = srv.Close() })

		eventually(t, func() bool {
			if l := c.Leader(t); l != next {
				tctx, cancel := context.WithTimeout(ctx, 5*time.Second)
				_, _ = c.Cluster(l).TransferLeader(tctx, &ticketv1.TransferLeaderRequest{Id: c.Node(next).ID})
				cancel()
			}
			return c.Leader(t) == next
		}, "leadership moves to the other voter")
		// The new leader logs this once every voter it asked has answered
		// or failed (server/leasegather.go).
		eventually(t, func() bool {
			logs, err := os.ReadFile(c.Node(next).LogFile)
			return err == nil && strings.Contains(string(logs), `"msg":"lease reports gathered"`)
		}, "the new leader has asked every voter")
		require.Zero(t, thief.calls.Load(), "the new leader took an answer from a revoked certificate")
		held, err := c.Lock(next).GetLock(ctx, &ticketv1.GetLockRequest{Key: "revoked/lock"})
		require.NoError(t, err)
		require.True(t, held.GetHeld(), "the lock is still held")
		require.Equal(t, got.GetToken(), held.GetToken())
	})
}
