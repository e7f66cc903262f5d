package security

import (
	"crypto/tls"
	"fmt"
)

// This file decides whether a connection to the client API comes from a
// current member node (docs/security.md#peer-identity-is-membership): the
// one check behind both things only a member may do there, assert a
// caller's principal when forwarding (Authenticator, AuthConfig.Member)
// and make a peer-only call (PeerService.LeaseRemaining).

// VerifyMember returns nil when the verified client certificate of cs is
// the node certificate (IsNodeCertificate) of a current member (isMember of
// its CN) and peer's revocation list (peer_crl_file) does not name it;
// peer may be nil (no peer TLS: no list). The peer list is checked here
// although the API's handshake checked only the client list
// (client_crl_file): a member's stolen and revoked key must not act as
// that member on the API port when it is refused at the peer port, even
// where the operator set only --peer-crl-file. Errors wrap ErrNotMember or
// ErrRevoked and name the certificate.
func VerifyMember(cs *tls.ConnectionState, isMember func(id string) bool, peer *Reloader) error {
	leaf := VerifiedLeaf(cs)
	switch {
	case leaf == nil:
		return fmt.Errorf("%w: no verified client certificate", ErrNotMember)
	case !IsNodeCertificate(leaf):
		return fmt.Errorf("%w: certificate %q is not a node certificate (server and client use)", ErrNotMember, leaf.Subject.CommonName)
	case isMember == nil || !isMember(leaf.Subject.CommonName):
		return fmt.Errorf("%w: %q is not a current member", ErrNotMember, leaf.Subject.CommonName)
	}
	if peer != nil {
		if err := peer.CheckRevoked(*cs); err != nil {
			return fmt.Errorf("%w, listed in the peer revocation list (peer_crl_file)", err)
		}
	}
	return nil
}
