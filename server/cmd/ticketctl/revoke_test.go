package main

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/security"
)

// TestCertRevoke: `ticketctl cert revoke` adds a certificate to the CA's
// ca.crl by --cert file and by --serial, extending the list it made first;
// a real node started with --client-crl-file on it refuses the revoked
// client certificates and serves one the list does not name.
func TestCertRevoke(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "certs")
	for _, args := range [][]string{
		{"cert", "create-ca", "--certs-dir", dir},
		{"cert", "create-node", "--certs-dir", dir, "--id", "n1", "--hosts", "127.0.0.1"},
		{"cert", "create-client", "--certs-dir", dir, "--name", "alice"},
		{"cert", "create-client", "--certs-dir", dir, "--name", "bob"},
		{"cert", "create-client", "--certs-dir", dir, "--name", "carol"},
	} {
		code, out, errs := runCtl(t, args...)
		require.Equal(t, exitOK, code, "%v: %s %s", args, out, errs)
	}
	certOf := func(name string) (string, *x509.Certificate) {
		f, _ := security.ClientFiles(name)
		path := filepath.Join(dir, f)
		kp, err := security.LoadKeyPair(path, filepath.Join(dir, "client."+name+".key"))
		require.NoError(t, err)
		return path, kp.Cert
	}
	aliceFile, alice := certOf("alice")
	_, bob := certOf("bob")

	code, out, errs := runCtl(t, "cert", "revoke", "--certs-dir", dir, "--cert", aliceFile)
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, out, `revoked "alice" serial `+alice.SerialNumber.String())
	assert.Contains(t, out, "CRL number 1, 1 revoked")
	code, out, errs = runCtl(t, "cert", "revoke", "--certs-dir", dir, "--serial", bob.SerialNumber.String())
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, out, "CRL number 2, 2 revoked")
	code, out, errs = runCtl(t, "cert", "revoke", "--certs-dir", dir, "--serial", "0x"+bob.SerialNumber.Text(16))
	require.Equal(t, exitOK, code, errs)
	assert.Contains(t, out, "already revoked")
	assert.Contains(t, out, "CRL number 3, 2 revoked")

	crl := filepath.Join(dir, security.CRLFile)
	data, err := os.ReadFile(crl)
	require.NoError(t, err)
	ca, err := security.LoadCA(dir)
	require.NoError(t, err)
	rev, err := security.ParseRevocations(data, []*x509.Certificate{ca.Cert})
	require.NoError(t, err, "signed by the CA of the certs dir")
	assert.True(t, rev.IsRevoked(alice.RawIssuer, alice.SerialNumber))
	assert.True(t, rev.IsRevoked(bob.RawIssuer, bob.SerialNumber))

	for _, bad := range [][]string{
		{"cert", "revoke", "--certs-dir", dir},
		{"cert", "revoke", "--certs-dir", dir, "--serial", "1", "--cert", aliceFile},
		{"cert", "revoke", "--certs-dir", dir, "--serial", "-3"},
		{"cert", "revoke", "--certs-dir", dir, "--serial", "twelve"},
	} {
		code, _, errs := runCtl(t, bad...)
		assert.Equal(t, exitUsage, code, "%v: %s", bad, errs)
	}
	// A certificate of another CA is not this CA's to revoke.
	other := filepath.Join(t.TempDir(), "other")
	_, err = security.CreateCA(other, time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateClient(other, "alice", time.Hour, false)
	require.NoError(t, err)
	code, _, errs = runCtl(t, "cert", "revoke", "--certs-dir", dir, "--cert", filepath.Join(other, "client.alice.crt"))
	assert.Equal(t, exitError, code, errs)
	assert.Contains(t, errs, "not issued by the CA")

	c := ticketdtest.Start(t, ticketdtest.Options{
		Nodes: 1,
		Args:  []string{"--client-crl-file", crl},
		TLS:   &ticketdtest.TLS{CertsDir: dir, ClientCertAuth: true, Client: "carol"},
	})
	ep := c.Node(0).APIAddr
	as := func(name string) []string {
		cert, key := security.ClientFiles(name)
		return []string{"--cacert", filepath.Join(dir, "ca.crt"), "--cert", filepath.Join(dir, cert), "--key", filepath.Join(dir, key)}
	}
	for _, name := range []string{"alice", "bob"} {
		code, _, errs := ctl(t, ep, append(as(name), "--timeout", "3s", "status")...)
		assert.NotEqual(t, exitOK, code, "revoked %s: %s", name, errs)
	}
	code, _, errs = ctl(t, ep, append(as("carol"), "status")...)
	assert.Equal(t, exitOK, code, "carol is not revoked: %s", errs)
}

// TestBearerTokenOverPlaintext: ticketctl refuses to send a bearer token
// over plaintext to a non-loopback address (a usage error, before any
// connection), and sends it to a loopback one with a warning on stderr.
func TestBearerTokenOverPlaintext(t *testing.T) {
	for _, ep := range []string{"10.0.0.1:7001", "http://192.0.2.1:7001", "db.example.com:7001"} {
		code, _, errs := ctl(t, ep, "--token", "secret", "status")
		assert.Equal(t, exitUsage, code, "%s: %s", ep, errs)
		assert.Contains(t, errs, "refusing to send the bearer token")
		assert.Contains(t, errs, ep)
	}
	c := ticketdtest.Start(t, ticketdtest.Options{Nodes: 1})
	c.WaitLeader(t, 30*time.Second)
	ep := c.Node(0).APIAddr
	code, _, errs := ctl(t, ep, "--token", "secret", "status")
	assert.Equal(t, exitOK, code, errs)
	assert.Contains(t, errs, "warning: sending the bearer token over plaintext to "+ep)
	code, _, errs = ctl(t, ep, "status")
	assert.Equal(t, exitOK, code, errs)
	assert.NotContains(t, errs, "bearer token", "no token, no warning")
}
