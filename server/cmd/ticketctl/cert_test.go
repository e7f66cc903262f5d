package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// runCtl runs ticketctl with args and no endpoints flag.
func runCtl(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	code := run(ctx, args, &out, &errb)
	return code, out.String(), errb.String()
}

// TestCertCommandsAndTLSFlags makes a CA, a node and a client certificate
// with "ticketctl cert", starts a node with client TLS and client-cert auth
// on them, and locks through it with --cacert, --cert and --key (and the
// TICKETD_* variables); without the client certificate it is refused.
func TestCertCommandsAndTLSFlags(t *testing.T) {
	old := syscall.Umask(0)
	dir := filepath.Join(t.TempDir(), "certs")
	for _, args := range [][]string{
		{"cert", "create-ca", "--certs-dir", dir},
		{"cert", "create-node", "--certs-dir", dir, "--id", "n1", "--hosts", "127.0.0.1,localhost"},
		{"cert", "create-client", "--certs-dir", dir, "--name", "orders-svc"},
	} {
		code, out, errs := runCtl(t, args...)
		require.Equal(t, exitOK, code, "%v: %s %s", args, out, errs)
	}
	syscall.Umask(old)
	for name, mode := range map[string]os.FileMode{"ca.key": 0o600, "node-n1.key": 0o600, "client.orders-svc.key": 0o600, "ca.crt": 0o644} {
		fi, err := os.Stat(filepath.Join(dir, name))
		require.NoError(t, err)
		assert.Equal(t, mode, fi.Mode().Perm(), name)
	}
	code, _, errs := runCtl(t, "cert", "create-ca", "--certs-dir", dir)
	assert.Equal(t, exitError, code, "an existing CA is kept")
	assert.Contains(t, errs, "--overwrite")

	c := ticketdtest.Start(t, ticketdtest.Options{Nodes: 1, TLS: &ticketdtest.TLS{CertsDir: dir, ClientCertAuth: true, Client: "orders-svc"}})
	ep := c.Node(0).APIAddr
	ca := filepath.Join(dir, "ca.crt")
	cert, key := filepath.Join(dir, "client.orders-svc.crt"), filepath.Join(dir, "client.orders-svc.key")

	code, out, errs := ctl(t, ep, "--cacert", ca, "--cert", cert, "--key", key, "lock", "acquire", "tls/k", "--ttl", "10s")
	require.Equal(t, exitOK, code, "stdout %q stderr %q", out, errs)

	code, _, _ = ctl(t, ep, "--timeout", "2s", "--cacert", ca, "lock", "acquire", "tls/other", "--ttl", "10s")
	assert.NotEqual(t, exitOK, code, "no client certificate: refused")

	t.Setenv("TICKETD_CACERT", ca)
	t.Setenv("TICKETD_CERT", cert)
	t.Setenv("TICKETD_KEY_FILE", key)
	code, out, errs = ctl(t, "https://"+ep, "status")
	require.Equal(t, exitOK, code, "TICKETD_* variables: stdout %q stderr %q", out, errs)
}
