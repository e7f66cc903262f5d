package server_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"
	"google.golang.org/protobuf/proto"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server"
	"github.com/ticketd/ticketd/server/internal/nodetest"
	"github.com/ticketd/ticketd/server/internal/peerpb"
	"github.com/ticketd/ticketd/server/internal/peerpb/peerpbconnect"
	"github.com/ticketd/ticketd/server/security"
)

// askLeases calls PeerService.LeaseRemaining at addr over TLS with cert and
// returns every page of the answer.
func askLeases(ctx context.Context, p nodetest.PKI, addr string, cert tls.Certificate) ([]*peerpb.LeaseRemainingPage, error) {
	cfg := &tls.Config{RootCAs: p.Pool(), Certificates: []tls.Certificate{cert}}
	return readLeases(ctx, peerpbconnect.NewPeerServiceClient(nodetest.TLSHTTPClient(cfg, false), "https://"+addr))
}

// TestLeaseRemainingIsPeerOnly: on a node with client TLS and client-cert
// auth, PeerService.LeaseRemaining (docs/design.md#leases) answers a caller
// presenting the node certificate of a current member with the node's own
// measure of each lease, and refuses with PermissionDenied a client
// certificate of the same CA and a node certificate for an id no member
// has (docs/security.md#peer-identity-is-membership).
func TestLeaseRemainingIsPeerOnly(t *testing.T) {
	t.Parallel()
	p := nodetest.NewPKI(t)
	n9, err := p.CA.Issue(security.CertOptions{CommonName: "n9", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	require.NoError(t, err)
	member, err := tls.LoadX509KeyPair(p.Path("node-n1.crt"), p.Path("node-n1.key"))
	require.NoError(t, err)
	s := nodetest.StartStandalone(t, p.SecureConfig)
	ctx := ctxT(t)

	lc := ticketv1connect.NewLockServiceClient(nodetest.TLSHTTPClient(p.ClientTLS(true), false), "https://"+s.Addr)
	got, err := lc.Acquire(ctx, &ticketv1.AcquireRequest{Key: "peer/a", LeaseMs: 60_000, Owner: "o"})
	require.NoError(t, err)

	for name, cert := range map[string]tls.Certificate{"client certificate": p.Client.TLS(), "non-member node certificate": n9.TLS()} {
		_, err := askLeases(ctx, p, s.Addr, cert)
		require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "%s: %v", name, err)
	}

	pages, err := askLeases(ctx, p, s.Addr, member)
	require.NoError(t, err)
	require.Len(t, pages, 1)
	require.Equal(t, "n1", pages[0].GetNodeId())
	require.Len(t, pages[0].GetLocks(), 1)
	l := pages[0].GetLocks()[0]
	require.Equal(t, "peer/a", l.GetKey())
	require.Equal(t, got.GetToken(), l.GetToken())
	require.NotZero(t, l.GetSeenIndex())
	require.Greater(t, l.GetRemainingMs(), int64(0))
	require.LessOrEqual(t, l.GetRemainingMs(), int64(60_000))

	// A table larger than one page is sent in several pages, each under
	// the leader's read cap, every lease once and in key order.
	const many = 700
	long := strings.Repeat("k", 900)
	for i := range many {
		_, err := lc.Acquire(ctx, &ticketv1.AcquireRequest{Key: fmt.Sprintf("peer/b/%04d/%s", i, long), LeaseMs: 60_000, Owner: "o"})
		require.NoError(t, err)
	}
	pages, err = askLeases(ctx, p, s.Addr, member)
	require.NoError(t, err)
	require.Greater(t, len(pages), 2, "%d leases of about 1 KB in pages of about 256 KiB", many+1)
	var keys []string
	for _, page := range pages {
		require.Less(t, proto.Size(page), 1<<20)
		for _, l := range page.GetLocks() {
			keys = append(keys, l.GetKey())
		}
	}
	require.Len(t, keys, many+1)
	require.True(t, slices.IsSorted(keys))
}

// TestLeaseRemainingRefusesPeerRevokedCertificate: a node whose peer
// revocation list (peer_crl_file) names an earlier certificate of a member
// (as after a key compromise and re-issue) refuses PeerService.LeaseRemaining
// to that certificate with PermissionDenied, as its peer port refuses it,
// although the client API's list (client_crl_file, unset here) lets it
// through the handshake; the member's current certificate is answered
// (docs/security.md#revocation).
func TestLeaseRemainingRefusesPeerRevokedCertificate(t *testing.T) {
	t.Parallel()
	p, stolen, member, s := startWithPeerRevokedKey(t, nil)
	ctx := ctxT(t)

	_, err := askLeases(ctx, p, s.Addr, stolen.TLS())
	require.Equal(t, connect.CodePermissionDenied, connect.CodeOf(err), "revoked for peers: %v", err)
	pages, err := askLeases(ctx, p, s.Addr, member)
	require.NoError(t, err)
	require.Len(t, pages, 1)
}

// TestLeaseRemainingCutsStalledReader: a PeerService.LeaseRemaining stream
// whose reader never reads is ended by the node once its write limit
// (server.WithPeerCallLimit; reportSendLimit by default) has passed, so it
// holds no goroutine and no page of reports for as long as the caller
// keeps the connection. The reader is a raw HTTP/2 client that grants the
// node no flow-control window and never opens one: the node's stream is
// reset (RST_STREAM). On an open API (plaintext, authorization off) anyone
// may make that call. A caller that reads gets its whole answer, over
// HTTP/2 and over HTTP/1.1.
func TestLeaseRemainingCutsStalledReader(t *testing.T) {
	t.Parallel()
	const limit = 2 * time.Second
	in, _ := memNodeWith(t, []server.Option{server.WithPeerCallLimit(limit)})
	ctx := ctxT(t)
	_, err := in.Lock.Acquire(ctx, &ticketv1.AcquireRequest{Key: "stall/a", LeaseMs: 60_000, Owner: "o"})
	require.NoError(t, err)

	raw := dialRawH2(t, in.Addr, 0)
	id := raw.openStream(peerpbconnect.PeerServiceLeaseRemainingProcedure, &peerpb.LeaseRemainingRequest{Term: 1})
	require.Empty(t, raw.awaitReset(id, "LeaseRemaining").data, "no byte is sent without a window")

	// A reader that reads is answered in full, over HTTP/2 ...
	pc := peerpbconnect.NewPeerServiceClient(nodetest.H2CClient(), "http://"+in.Addr)
	pages, err := readLeases(ctx, pc)
	require.NoError(t, err)
	require.Len(t, pages, 1)
	// ... and over HTTP/1.1.
	tr := &http.Transport{Protocols: new(http.Protocols)}
	tr.Protocols.SetHTTP1(true)
	t.Cleanup(tr.CloseIdleConnections)
	pages, err = readLeases(ctx, peerpbconnect.NewPeerServiceClient(&http.Client{Transport: tr}, "http://"+in.Addr))
	require.NoError(t, err)
	require.Len(t, pages, 1)
}

// readLeases reads every page of a LeaseRemaining answer from pc.
func readLeases(ctx context.Context, pc peerpbconnect.PeerServiceClient) ([]*peerpb.LeaseRemainingPage, error) {
	stream, err := pc.LeaseRemaining(ctx, &peerpb.LeaseRemainingRequest{Term: 1})
	if err != nil {
		return nil, err
	}
	defer func() { _ = stream.Close() }()
	var pages []*peerpb.LeaseRemainingPage
	for stream.Receive() {
		pages = append(pages, stream.Msg())
	}
	return pages, stream.Err()
}
