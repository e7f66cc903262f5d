package security

import (
	"context"
	"crypto/tls"
	"crypto/x509"
)

// Principal is an authenticated identity: the CN of a verified client
// certificate, or the principal a bearer token is bound to in the tokens
// file (Consul ACL tokens), or, on the leader, the original caller of a
// request a member node forwarded.
type Principal struct {
	// Name is the identity policy rules name ("orders-svc").
	Name string
	// Source is how it was established: SourceCertificate, SourceToken or
	// SourceForwarded.
	Source string
}

// Sources of a Principal.
const (
	// SourceCertificate: the CN of the client certificate verified on the connection.
	SourceCertificate = "certificate"
	// SourceToken: an `Authorization: Bearer` token found in the tokens file.
	SourceToken = "token"
	// SourceForwarded: asserted in PrincipalHeader by a member node that
	// forwarded the request and authenticated with its node certificate.
	SourceForwarded = "forwarded"
)

// PrincipalHeader carries, from a forwarding follower to the leader, the
// principal the follower authenticated from the original caller's
// certificate. The leader believes it only from a connection whose client
// certificate is a node certificate (server and client use) of a current
// member (Authenticator.Authenticate); from anyone else the request is
// refused, so a client cannot assert a principal by sending it.
const PrincipalHeader = "Ticketd-Principal"

// principalKey and connKey are context keys.
type (
	principalKey struct{}
	connKey      struct{}
)

// WithPrincipal returns ctx carrying p.
func WithPrincipal(ctx context.Context, p Principal) context.Context {
	return context.WithValue(ctx, principalKey{}, p)
}

// PrincipalFrom returns the principal of ctx, set by the interceptor
// (Authenticator.Interceptor); false when the request was not authenticated
// (authentication off, or no credential).
func PrincipalFrom(ctx context.Context) (Principal, bool) {
	p, ok := ctx.Value(principalKey{}).(Principal)
	return p, ok && p.Name != ""
}

// WithConnState returns ctx carrying the TLS state of the request's
// connection (nil for plaintext). The HTTP layer sets it, since connect
// handlers do not see the connection; Authenticate reads it.
func WithConnState(ctx context.Context, cs *tls.ConnectionState) context.Context {
	return context.WithValue(ctx, connKey{}, cs)
}

// ConnStateFrom returns the TLS state recorded by WithConnState (nil when
// none or plaintext).
func ConnStateFrom(ctx context.Context) *tls.ConnectionState {
	cs, _ := ctx.Value(connKey{}).(*tls.ConnectionState)
	return cs
}

// VerifiedLeaf returns the client certificate of cs that crypto/tls verified
// against the trusted CA (the leaf of its first verified chain); nil for a
// plaintext connection, no certificate, or one that was not verified.
func VerifiedLeaf(cs *tls.ConnectionState) *x509.Certificate {
	if cs == nil || len(cs.VerifiedChains) == 0 || len(cs.VerifiedChains[0]) == 0 {
		return nil
	}
	return cs.VerifiedChains[0][0]
}

// IsNodeCertificate reports whether cert is valid for both server and client
// authentication, as `ticketctl cert create-node` makes node certificates
// and client certificates are not (the same test PeerConfig applies).
func IsNodeCertificate(cert *x509.Certificate) bool {
	if cert == nil {
		return false
	}
	return verifyPeerUsage(tls.ConnectionState{PeerCertificates: []*x509.Certificate{cert}}) == nil
}
