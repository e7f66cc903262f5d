package server

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"connectrpc.com/connect"
	"go.uber.org/zap"

	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/internal/peerpb"
	"github.com/ticketd/ticketd/server/internal/peerpb/peerpbconnect"
	"github.com/ticketd/ticketd/server/lessor"
	"github.com/ticketd/ticketd/server/security"
)

// This file is the new leader's half of the quorum minimum of lease
// deadlines (docs/design.md#leases): right after promotion, in the
// background, it asks every other voter once for the time each lease has
// left (PeerService.LeaseRemaining, leasereport.go) and lowers its own
// deadlines to the answers (lessor.Lessor.Lower). Service does not wait for
// it: until an answer arrives the leader expires by its own deadlines, which
// are never early, only possibly late.

const (
	// gatherTimeout bounds the whole gathering of one promotion; voters that
	// have not answered by then are not waited for.
	gatherTimeout = 10 * time.Second
	// reportReadMaxBytes caps one page of a voter's answer; a voter sends
	// pages of about reportPageBytes.
	reportReadMaxBytes = 1 << 20
	// maxReportMS is the largest remaining_ms that converts to a
	// time.Duration without overflow; a larger one is malformed.
	maxReportMS = math.MaxInt64 / int64(time.Millisecond)
)

// errLeadershipEnded ends a gathering whose leader was demoted or closed:
// its answers are discarded.
var errLeadershipEnded = errors.New("no longer the leader of the gathering's term")

// gatherLeaseReports runs once per promotion, for the Raft term term: it
// asks every other voter whose API address the member directory records,
// in parallel, and lowers this node's deadlines page by page as answers
// stream in, for as long as it leads term and at most gatherTimeout. Every
// report is at or after the client's deadline (each voter measured from its
// own apply, after the client sent the request), so the minimum over the
// answers, this node's own deadline included, is never early; once a voter
// that applied the lease's last Grant/Renew in time has answered, the lease
// is back within its bound. Leases of the reports' seen index only: a
// renewal since then makes a report irrelevant. Nothing is asked when this
// node times no lease, or when a voter's answer could not be authenticated
// (a plaintext API with authorization on: trustPeerAnswers).
func (n *Node) gatherLeaseReports(term uint64) {
	defer n.bg.Done()
	if n.lessor.Len() == 0 && n.lessor.Sessions() == 0 {
		return
	}
	if !n.trustPeerAnswers() {
		n.log.Info("lease reports not gathered: the client API is plaintext with authorization on, so a voter's answer cannot be authenticated; leases keep this node's deadlines (never early, possibly late)")
		return
	}
	b := n.backend()
	if b == nil {
		return
	}
	ctx, cancel := context.WithTimeout(n.life, gatherTimeout)
	defer cancel()
	start := time.Now()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		total    lessor.LowerResult
		answered []string
		asked    int
	)
	for _, m := range b.Status().Members {
		if !m.Voter || m.ID == n.cfg.ID {
			continue
		}
		addr, _ := n.sm.MemberAPIAddr(m.ID)
		if addr == "" {
			continue // not recorded yet: cannot be asked
		}
		asked++
		wg.Add(1)
		go func() {
			defer wg.Done()
			res, err := n.askLeaseReports(ctx, term, m.ID, addr)
			mu.Lock()
			defer mu.Unlock()
			total.Add(res)
			if err != nil {
				n.log.Info("lease reports of a voter not (fully) gathered", zap.String("voter", m.ID), zap.Uint64("term", term), zap.Error(err))
				return
			}
			answered = append(answered, m.ID)
		}()
	}
	wg.Wait()
	if asked == 0 {
		return // a lone voter, or no other voter's address recorded yet
	}
	if total.Invalid > 0 {
		n.log.Warn("malformed lease reports ignored", zap.Int("reports", total.Invalid), zap.Uint64("term", term))
	}
	n.log.Info("lease reports gathered", zap.Uint64("term", term), zap.Strings("voters", answered),
		zap.Int("lowered", total.Lowered), zap.Int("kept", total.Kept), zap.Int("stale", total.Stale),
		zap.Duration("took", time.Since(start)))
}

// askLeaseReports asks voter id at its API address addr for its lease
// reports and lowers this node's deadlines with each page as it arrives.
// A page that names another node, or that arrives once this node no longer
// leads term, ends the call and is not used.
func (n *Node) askLeaseReports(ctx context.Context, term uint64, id, addr string) (lessor.LowerResult, error) {
	var total lessor.LowerResult
	client, done := n.peerClient(id, addr)
	defer done()
	stream, err := client.LeaseRemaining(ctx, &peerpb.LeaseRemainingRequest{Term: term})
	if err != nil {
		return total, err
	}
	defer func() { _ = stream.Close() }()
	var reports []lessor.Report
	for stream.Receive() {
		page := stream.Msg()
		if page.GetNodeId() != id {
			return total, fmt.Errorf("voter at %s answered as %q, not %q", addr, page.GetNodeId(), id)
		}
		var invalid int
		reports, invalid = reportsOf(page, reports[:0])
		res := n.lessor.Lower(term, reports)
		if res.Discarded || !n.stillLeader(term) {
			return total, errLeadershipEnded
		}
		res.Invalid += invalid
		total.Add(res)
	}
	return total, stream.Err()
}

// reportsOf appends the reports of page to out, leaving out (and counting)
// those whose remaining_ms is negative or too large to be a duration;
// lessor.Lessor.Lower checks the rest.
func reportsOf(page *peerpb.LeaseRemainingPage, out []lessor.Report) ([]lessor.Report, int) {
	invalid := 0
	ok := func(ms int64) bool {
		if ms < 0 || ms > maxReportMS {
			invalid++
			return false
		}
		return true
	}
	for _, l := range page.GetLocks() {
		if ok(l.GetRemainingMs()) {
			out = append(out, lessor.Report{Key: l.GetKey(), Token: l.GetToken(), Seen: l.GetSeenIndex(),
				Remaining: time.Duration(l.GetRemainingMs()) * time.Millisecond})
		}
	}
	for _, s := range page.GetSessions() {
		if s.GetId() == 0 {
			invalid++
			continue
		}
		if ok(s.GetRemainingMs()) {
			out = append(out, lessor.Report{Session: s.GetId(), Seen: s.GetSeenIndex(),
				Remaining: time.Duration(s.GetRemainingMs()) * time.Millisecond})
		}
	}
	return out, invalid
}

// trustPeerAnswers reports whether a voter's answer on its API port can be
// believed: over TLS the voter must present its own node certificate
// (peerClient checks), and on a plaintext API only when authorization is
// off, where an impostor could do no more than any caller may (release any
// lock). A plaintext API with authorization on, where an impostor on a
// down voter's address could shorten leases that only their owners may
// end, is not asked. The leader's command-version probes go by it too
// (commandversion.go).
func (n *Node) trustPeerAnswers() bool {
	return n.fwd.Config().TLS != nil || !n.authn().Enabled()
}

// peerClient returns a PeerService client of voter id at addr, on a
// connection of its own that done closes. Over TLS (the forwarder's
// config: the cluster's CAs, this node's API certificate as its client
// certificate) the voter must present its own node certificate, listed in
// neither revocation list this node loads (client_crl_file, peer_crl_file:
// docs/security.md#revocation), as the peer port requires of it
// (security.DialMember).
func (n *Node) peerClient(id, addr string) (peerpbconnect.PeerServiceClient, func()) {
	fc := n.fwd.Config()
	if fc.TLS != nil {
		fc.TLS = security.DialMember(fc.TLS, id, n.http.APICert(), n.peerCert)
	}
	f := forward.New(fc)
	return peerpbconnect.NewPeerServiceClient(f.HTTPClient(), f.URL(addr), connect.WithReadMaxBytes(reportReadMaxBytes)), f.Close
}
