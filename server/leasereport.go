package server

import (
	"context"
	"errors"
	"fmt"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/internal/peerpb"
	"github.com/ticketd/ticketd/server/internal/peerpb/peerpbconnect"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/security"
)

// This file is a voter's half of the quorum minimum of lease deadlines
// (docs/design.md#leases): PeerService.LeaseRemaining, which a newly
// promoted leader calls on each voter (leasegather.go), answered from this
// node's lessor. It is a peer-only call (authorizePeer).

const (
	// reportPageKeys is how many keys (or sessions) one read of the table
	// takes: the table's read lock and the lessor's mutex are each held for
	// one such page at a time, never for the whole table.
	reportPageKeys = 512
	// reportPageBytes is the size at which a page of reports is sent: a
	// report is at most core.MaxKeyBytes plus a few dozen bytes, so a page
	// stays well under reportReadMaxBytes, the leader's cap.
	reportPageBytes = 256 << 10
	// reportOverhead is the encoded size of a report beside its key (field
	// tags, varints, the repeated field's length), rounded up.
	reportOverhead = 40
)

// peerService implements ticketd.peer.v1.PeerService: calls that only other
// members of the cluster make.
type peerService struct {
	n *Node
}

var _ peerpbconnect.PeerServiceHandler = (*peerService)(nil)

// LeaseRemaining streams this node's report of every lease it times: each
// lock holder timed on its own (in key and token order, a page of the table
// at a time) and then each session (in id order), with the seen index and
// the time left on this node's clock rounded up to whole milliseconds
// (lessor.Lessor.LockReports). Any node answers, leader or not; the reports
// are what the node measures, and the caller lowers only its own deadlines
// with them. Errors: PermissionDenied unless the caller is a member
// (authorizePeer); the stream's own on a caller that went away.
func (s *peerService) LeaseRemaining(ctx context.Context, req *peerpb.LeaseRemainingRequest, stream *connect.ServerStream[peerpb.LeaseRemainingPage]) error {
	n := s.n
	if err := n.authorizePeer(ctx); err != nil {
		return err
	}
	w := &reportWriter{stream: stream, node: n.cfg.ID}
	var reports []lessor.Report
	for after := ""; ; {
		locks := n.sm.Range("", after, reportPageKeys)
		if len(locks) == 0 {
			break
		}
		after = locks[len(locks)-1].Key
		reports = n.lessor.LockReports(locks, reports[:0])
		if err := w.add(reports); err != nil {
			return err
		}
	}
	for after := uint64(0); ; {
		sessions := n.sm.SessionRange(after, reportPageKeys)
		if len(sessions) == 0 {
			break
		}
		after = sessions[len(sessions)-1].ID
		reports = n.lessor.SessionReports(sessions, reports[:0])
		if err := w.add(reports); err != nil {
			return err
		}
	}
	if err := w.flush(); err != nil {
		return err
	}
	n.log.Debug("lease reports sent", zap.Uint64("leader_term", req.GetTerm()), zap.Int("locks", w.locks), zap.Int("sessions", w.sessions))
	return nil
}

// reportWriter sends reports in pages of about reportPageBytes.
type reportWriter struct {
	stream          *connect.ServerStream[peerpb.LeaseRemainingPage]
	node            string
	page            peerpb.LeaseRemainingPage
	size            int
	sent            bool
	locks, sessions int
}

// add puts reports in the page, sending it whenever it is full.
func (w *reportWriter) add(reports []lessor.Report) error {
	for _, r := range reports {
		ms := r.Remaining.Milliseconds() // whole: the lessor rounded up
		if r.Session != 0 {
			w.page.Sessions = append(w.page.Sessions, &peerpb.SessionLease{Id: r.Session, SeenIndex: r.Seen, RemainingMs: ms})
			w.sessions++
		} else {
			w.page.Locks = append(w.page.Locks, &peerpb.LockLease{Key: r.Key, Token: r.Token, SeenIndex: r.Seen, RemainingMs: ms})
			w.locks++
		}
		w.size += len(r.Key) + reportOverhead
		if w.size >= reportPageBytes {
			if err := w.flush(); err != nil {
				return err
			}
		}
	}
	return nil
}

// flush sends the page if it holds anything, or if nothing was sent yet (an
// empty table still answers once, naming this node).
func (w *reportWriter) flush() error {
	if w.sent && len(w.page.Locks) == 0 && len(w.page.Sessions) == 0 {
		return nil
	}
	w.page.NodeId = w.node
	if err := w.stream.Send(&w.page); err != nil {
		return err
	}
	w.page.Locks, w.page.Sessions, w.size, w.sent = w.page.Locks[:0], w.page.Sessions[:0], 0, true
	return nil
}

// authorizePeer admits a peer-only call (docs/security.md#peer-identity-is-membership):
// the connection's verified client certificate must be a node certificate
// (valid for server and client use, as `ticketctl cert create-node` makes
// them) whose CN is a current member, as the peer port and a forwarded
// principal require. Without a verified certificate the call is admitted
// only on an open API (openAPI), where any caller may already read and
// release every lock. A node certificate that the peer revocation list
// (peer_crl_file) names is refused too, as the peer port refuses it, even
// when the client list (client_crl_file, checked at the API's handshake)
// does not: a member's stolen and revoked key reads nothing here.
// Errors: connect PermissionDenied.
func (n *Node) authorizePeer(ctx context.Context) error {
	cs := security.ConnStateFrom(ctx)
	leaf := security.VerifiedLeaf(cs)
	switch {
	case leaf != nil && security.IsNodeCertificate(leaf) && n.hasMember(leaf.Subject.CommonName):
		if n.peerCert != nil {
			if err := n.peerCert.CheckRevoked(*cs); err != nil {
				return connect.NewError(connect.CodePermissionDenied, fmt.Errorf("peer-only call: %w", err))
			}
		}
		return nil
	case leaf != nil:
		return connect.NewError(connect.CodePermissionDenied,
			fmt.Errorf("peer-only call: certificate %q is not the node certificate of a current member", leaf.Subject.CommonName))
	case n.openAPI():
		return nil
	default:
		return connect.NewError(connect.CodePermissionDenied,
			errors.New("peer-only call: present the node certificate of a current member"))
	}
}

// openAPI reports whether this node's client API is plaintext with
// authorization off (loopback, or --insecure; docs/security.md#threat-model):
// every caller may already read and release every lock there, so a peer
// call asks no identity of its caller, and the leader takes a voter's
// answer as it would take any caller's request.
func (n *Node) openAPI() bool {
	return n.http.APICert() == nil && !n.authn().Enabled()
}
