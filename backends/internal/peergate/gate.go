// Package peergate binds a peer certificate to membership, for both
// backends' Raft transports (docs/security.md#peer-identity-is-membership).
//
// Over mutual TLS, a peer certificate's common name is a member id (what
// `ticketctl cert create-node --id` writes). A Gate lets a certificate
// speak on the peer port only when that name is a current member of the
// replicated configuration, voter or learner: a certificate the cluster's CA
// signed for an id no member has (create-node --id n9), or the certificate
// of a member that was removed, is refused at the TLS handshake (ServerTLS)
// and on every message (Check), and the connections and streams opened
// under it before its removal are closed as soon as the removal reaches the
// configuration (Refresh closes what Track registered). Removing a member
// is how its key is retired, as etcd refuses a removed member's messages
// (rafthttp drops them once the member is gone from the cluster).
//
// Membership comes from the backend's configuration through the source
// function: etcd's applied ConfState (the address book's ids), hashicorp's
// latest configuration (which its raft itself acts on, Raft thesis §4.1).
// A node whose configuration is still empty (a joining node before the
// leader's first append or snapshot reaches it) accepts the members it was
// given to join with (Learn: the bootstrap list or the --join member's
// answer, both replicated membership) and no one else; a node that does
// not know its configuration yet (the backend still opening) accepts no
// one, and peers retry.
//
// Usage:
//
//	g := peergate.New(source, log, count)
//	srv := g.ServerTLS(peerTLS)           // refuses non-members at the handshake
//	untrack := g.Track(cn, conn.Close)    // close it when cn leaves
//	if err := g.Check(cn); err != nil { } // on every message
//	g.Refresh()                           // after each configuration change
package peergate

import (
	"crypto/tls"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/core"
)

// ErrNotMember: the peer certificate's common name is not the id of a
// current member (or, on a node with no configuration yet, of a member it
// joins through); its connection or message is refused.
var ErrNotMember = errors.New("peer certificate names no current member")

// Source returns the ids of the current members (voters and learners) and
// whether the configuration is known yet. It must be cheap and safe for
// concurrent use: Check calls it for every message.
type Source func() (ids []string, known bool)

// Gate decides which peer certificates may speak. Safe for concurrent use.
type Gate struct {
	source  Source
	learned atomic.Pointer[[]string]
	log     *zap.Logger
	count   func(peer, kind string) // nil: no PeerObserver

	mu    sync.Mutex
	conns map[*tracked]struct{}
}

// tracked is one open connection or stream registered with Track.
type tracked struct {
	cn     string
	remote string
	close  func()
}

// New returns a Gate over source. log (nil: none) receives the refusals,
// count (nil: none) counts each as kind "identity" by remote address.
func New(source Source, log *zap.Logger, count func(peer, kind string)) *Gate {
	if log == nil {
		log = zap.NewNop()
	}
	return &Gate{source: source, log: log, count: count, conns: map[*tracked]struct{}{}}
}

// Learn sets the members a node with an empty configuration accepts: its
// bootstrap list or the members its --join answer named. A node whose
// configuration names members ignores them.
func (g *Gate) Learn(members []core.Member) {
	ids := make([]string, 0, len(members))
	for _, m := range members {
		ids = append(ids, m.ID)
	}
	g.learned.Store(&ids)
}

// Check returns nil when cn may speak: it is a current member's id, or the
// configuration is empty and cn was learned. Otherwise an error wrapping
// ErrNotMember that names cn.
func (g *Gate) Check(cn string) error {
	ids, known := g.source()
	if !known {
		return fmt.Errorf("%w: %q (membership not loaded yet)", ErrNotMember, cn)
	}
	if len(ids) == 0 {
		if l := g.learned.Load(); l != nil && slices.Contains(*l, cn) {
			return nil
		}
		return fmt.Errorf("%w: %q (this node is in no configuration yet and does not join through it)", ErrNotMember, cn)
	}
	if slices.Contains(ids, cn) {
		return nil
	}
	return fmt.Errorf("%w: %q", ErrNotMember, cn)
}

// Refuse logs and counts the refusal err of the peer at remote.
func (g *Gate) Refuse(remote string, err error) {
	g.log.Warn("refused peer: its certificate names no current member", zap.String("remote", remote), zap.Error(err))
	if g.count != nil {
		g.count(remote, "identity")
	}
}

// ServerTLS returns backends.PeerServerTLS(c) whose handshake also refuses a
// client certificate that Check refuses (after c's own VerifyConnection, if
// any); the transport logs and counts it as a refused handshake, with the
// remote address. Nil in, nil out.
func (g *Gate) ServerTLS(c *tls.Config) *tls.Config {
	s := backends.PeerServerTLS(c)
	if s == nil {
		return nil
	}
	prev := s.VerifyConnection
	s.VerifyConnection = func(cs tls.ConnectionState) error {
		if prev != nil {
			if err := prev(cs); err != nil {
				return err
			}
		}
		if len(cs.PeerCertificates) == 0 {
			return fmt.Errorf("%w: no certificate", ErrNotMember)
		}
		return g.Check(cs.PeerCertificates[0].Subject.CommonName)
	}
	return s
}

// Track registers an open connection or stream of the peer whose
// certificate names cn, at remote: Refresh calls closeFn once cn is no
// longer allowed. The returned func unregisters it (call it when the
// connection ends).
func (g *Gate) Track(cn, remote string, closeFn func()) (untrack func()) {
	t := &tracked{cn: cn, remote: remote, close: closeFn}
	g.mu.Lock()
	g.conns[t] = struct{}{}
	g.mu.Unlock()
	return func() {
		g.mu.Lock()
		delete(g.conns, t)
		g.mu.Unlock()
	}
}

// Refresh closes every tracked connection whose certificate Check now
// refuses (a member removed from the configuration). The backend calls it
// after each configuration change it applies.
func (g *Gate) Refresh() {
	var gone []*tracked
	g.mu.Lock()
	for t := range g.conns {
		if g.Check(t.cn) != nil {
			gone = append(gone, t)
			delete(g.conns, t)
		}
	}
	g.mu.Unlock()
	for _, t := range gone {
		g.log.Info("closing the peer connection of a removed member", zap.String("member", t.cn), zap.String("remote", t.remote))
		t.close()
	}
}
