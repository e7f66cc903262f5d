package security_test

import (
	"crypto/tls"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/security"
)

// TestDialMemberRequiresThatMembersCertificate: a client config from
// DialMember completes a handshake only with a server presenting the node
// certificate of the member it names: not another member's node
// certificate valid for the same address, nor a client certificate of the
// same CA (not valid for server use), though the CA signed all three.
func TestDialMemberRequiresThatMembersCertificate(t *testing.T) {
	p := newPKI(t)
	n2, err := p.ca.Issue(security.CertOptions{CommonName: "n2", Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	require.NoError(t, err)
	serverOnly, err := p.ca.Issue(security.CertOptions{CommonName: "n1", Hosts: []string{"127.0.0.1"}, Server: true})
	require.NoError(t, err)
	serve := func(kp *security.KeyPair) string {
		return serveTLS(t, &tls.Config{Certificates: []tls.Certificate{kp.TLS()}})
	}
	base := &tls.Config{RootCAs: p.pool()}

	_, err = talk(serve(p.node), security.DialMember(base, "n1"))
	require.NoError(t, err, "n1's own node certificate")
	_, err = talk(serve(n2), security.DialMember(base, "n1"))
	require.ErrorContains(t, err, `presented a certificate for "n2", not "n1"`)
	_, err = talk(serve(serverOnly), security.DialMember(base, "n1"))
	require.Error(t, err, "a certificate for n1 that is not a node certificate (server use only)")
	_, err = talk(serve(n2), base)
	require.NoError(t, err, "the base config is left unchanged")
}
