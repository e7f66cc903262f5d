package security_test

import (
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"math/big"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/config"
	"github.com/ticketd/ticketd/server/security"
)

// crlFiles is p.files with the revocation list of p's certs dir.
func (p pki) crlFiles(clientAuth bool) config.TLSFiles {
	f := p.files(clientAuth)
	f.CRLFile = filepath.Join(p.dir, security.CRLFile)
	return f
}

// issueNode makes a node certificate (server and client use) of p's CA.
func (p pki) issueNode(t *testing.T, cn string) *security.KeyPair {
	t.Helper()
	kp, err := p.ca.Issue(security.CertOptions{CommonName: cn, Hosts: []string{"127.0.0.1"}, Server: true, Client: true})
	require.NoError(t, err)
	return kp
}

func revoke(t *testing.T, p pki, kp *security.KeyPair) *security.Revoked {
	t.Helper()
	r, err := security.Revoke(p.dir, kp.Cert.SerialNumber, time.Hour)
	require.NoError(t, err)
	return r
}

// TestRevokeKeepsAndExtendsTheList: Revoke creates ca.crl signed by the CA,
// then extends it keeping every entry, with the CRL number growing; a
// serial listed already is kept once.
func TestRevokeKeepsAndExtendsTheList(t *testing.T) {
	p := newPKI(t)
	a, b := p.issueNode(t, "a"), p.issueNode(t, "b")
	r1 := revoke(t, p, a)
	assert.Equal(t, int64(1), r1.Number.Int64())
	assert.False(t, r1.Already)
	r2 := revoke(t, p, b)
	assert.Equal(t, int64(2), r2.Number.Int64())
	assert.Equal(t, 2, r2.Entries)
	r3 := revoke(t, p, a)
	assert.True(t, r3.Already)
	assert.Equal(t, 2, r3.Entries)
	assert.Equal(t, int64(3), r3.Number.Int64())

	data, err := os.ReadFile(filepath.Join(p.dir, security.CRLFile))
	require.NoError(t, err)
	block, _ := pem.Decode(data)
	require.NotNil(t, block)
	rl, err := x509.ParseRevocationList(block.Bytes)
	require.NoError(t, err)
	require.NoError(t, rl.CheckSignatureFrom(p.ca.Cert))
	assert.WithinDuration(t, time.Now().Add(time.Hour), rl.NextUpdate, 5*time.Minute)
	rev, err := security.ParseRevocations(data, []*x509.Certificate{p.ca.Cert})
	require.NoError(t, err)
	assert.Equal(t, 2, rev.Len())
	assert.True(t, rev.IsRevoked(a.Cert.RawIssuer, a.Cert.SerialNumber))
	assert.True(t, rev.IsRevoked(b.Cert.RawIssuer, b.Cert.SerialNumber))
	assert.False(t, rev.IsRevoked(p.node.Cert.RawIssuer, p.node.Cert.SerialNumber))

	// DER is accepted as well as PEM.
	der, err := security.ParseRevocations(block.Bytes, []*x509.Certificate{p.ca.Cert})
	require.NoError(t, err)
	assert.Equal(t, 2, der.Len())
}

// TestRevocationListFromAnotherCARefused: a list signed by another CA (even
// one with the same name) is refused at load, at start and on reload, and
// the reload keeps the previous list.
func TestRevocationListFromAnotherCARefused(t *testing.T) {
	p := newPKI(t)
	other := newPKI(t) // its CA has the same subject, "ticketd CA", and another key
	victim := p.issueNode(t, "victim")
	_, err := security.Revoke(other.dir, victim.Cert.SerialNumber, time.Hour)
	require.NoError(t, err)
	forged, err := os.ReadFile(filepath.Join(other.dir, security.CRLFile))
	require.NoError(t, err)

	_, err = security.ParseRevocations(forged, []*x509.Certificate{p.ca.Cert})
	require.ErrorIs(t, err, security.ErrBadCRL)

	// A list of an issuer the bundle does not hold at all.
	stranger, err := security.NewCA("stranger CA", time.Hour)
	require.NoError(t, err)
	der, err := x509.CreateRevocationList(rand.Reader, &x509.RevocationList{Number: big.NewInt(1), ThisUpdate: time.Now(), NextUpdate: time.Now().Add(time.Hour)}, stranger.Cert, stranger.Key)
	require.NoError(t, err)
	_, err = security.ParseRevocations(der, []*x509.Certificate{p.ca.Cert})
	require.ErrorIs(t, err, security.ErrBadCRL)

	crl := filepath.Join(p.dir, security.CRLFile)
	require.NoError(t, security.WriteFileForTest(crl, forged))
	_, err = security.NewReloader(p.crlFiles(true), nil)
	require.ErrorIs(t, err, security.ErrBadCRL, "refused at start")
	require.Contains(t, err.Error(), crl)

	require.NoError(t, os.Remove(crl))
	revoke(t, p, victim)
	r, err := security.NewReloader(p.crlFiles(true), nil)
	require.NoError(t, err)
	require.Equal(t, 1, r.Revocations().Len())
	require.NoError(t, security.WriteFileForTest(crl, forged))
	require.ErrorIs(t, r.Reload(), security.ErrBadCRL, "refused on reload")
	assert.True(t, r.Revocations().IsRevoked(victim.Cert.RawIssuer, victim.Cert.SerialNumber), "the previous list stays in use")
}

// TestRevokedClientRefusedAtHandshake: over real TLS with ServerConfig, a
// client certificate the list names is refused while another is served,
// and a list extended later applies after Reload without a restart.
func TestRevokedClientRefusedAtHandshake(t *testing.T) {
	p := newPKI(t)
	alice, err := p.ca.Issue(security.CertOptions{CommonName: "alice", Client: true})
	require.NoError(t, err)
	bob, err := p.ca.Issue(security.CertOptions{CommonName: "bob", Client: true})
	require.NoError(t, err)
	revoke(t, p, alice)
	r, err := security.NewReloader(p.crlFiles(true), nil)
	require.NoError(t, err)
	for _, clientAuth := range []bool{true, false} {
		addr := serveTLS(t, security.ServerConfig(r, clientAuth))
		as := func(kp *security.KeyPair) error {
			cfg := &tls.Config{RootCAs: p.pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{kp.TLS()}}
			_, err := talk(addr, cfg)
			return err
		}
		require.Error(t, as(alice), "revoked client certificate (client_cert_auth %v)", clientAuth)
		require.NoError(t, as(bob), "a certificate the list does not name")
	}

	addr := serveTLS(t, security.ServerConfig(r, true))
	revoke(t, p, bob)
	require.True(t, r.Changed())
	require.NoError(t, r.Reload())
	_, err = talk(addr, &tls.Config{RootCAs: p.pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{bob.TLS()}})
	require.Error(t, err, "the reloaded list applies to the next handshake")
}

// TestRevokedPeerRefusedBothWays: PeerConfig with a peer list refuses a
// revoked node certificate when accepting, and refuses a revoked server
// when dialing (the configs backends.PeerServerTLS and PeerClientTLS clone).
func TestRevokedPeerRefusedBothWays(t *testing.T) {
	p := newPKI(t)
	n2, n3 := p.issueNode(t, "n2"), p.issueNode(t, "n3")
	revoke(t, p, n3)
	r, err := security.NewReloader(p.crlFiles(true), nil)
	require.NoError(t, err)
	addr := serveTLS(t, security.PeerConfig(r, nil))
	as := func(kp *security.KeyPair) error {
		_, err := talk(addr, &tls.Config{RootCAs: p.pool(), ServerName: "127.0.0.1", Certificates: []tls.Certificate{kp.TLS()}})
		return err
	}
	require.NoError(t, as(n2))
	require.Error(t, as(n3), "accepting: revoked peer")

	// n3 serving: a node with the list does not dial it.
	dir := t.TempDir()
	require.NoError(t, p.ca.WriteFiles(dir, "ca.crt", "ca.key", false))
	require.NoError(t, n3.WriteFiles(dir, "n.crt", "n.key", false))
	n3r, err := security.NewReloader(config.TLSFiles{CertFile: filepath.Join(dir, "n.crt"), KeyFile: filepath.Join(dir, "n.key"), TrustedCAFile: filepath.Join(dir, "ca.crt")}, nil)
	require.NoError(t, err)
	revoked := serveTLS(t, security.PeerConfig(n3r, nil))
	dial := security.PeerConfig(r, nil).Clone()
	dial.ServerName = "127.0.0.1"
	_, err = talk(revoked, dial)
	require.ErrorIs(t, err, security.ErrRevoked, "dialing: revoked server")
}
