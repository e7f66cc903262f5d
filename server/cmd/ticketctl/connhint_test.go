package main

import (
	"net"
	"path/filepath"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/security"
)

// TestConnectionFailuresNameTheFix runs ticketctl against a real node with
// client TLS and client-certificate auth, and at addresses where nothing
// listens: each misconfiguration fails on its first attempts (not after
// --timeout, set long here) with exit 1 and a message that leads with the
// flag to fix: a plaintext request to the TLS port (--cacert), no trusted
// CA (--cacert), no client certificate (--cert, --key), every endpoint
// refusing (--endpoints).
func TestConnectionFailuresNameTheFix(t *testing.T) {
	dir := t.TempDir()
	_, err := security.CreateCA(dir, time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateNode(dir, "n1", []string{"127.0.0.1"}, time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateClient(dir, "admin", time.Hour, false)
	require.NoError(t, err)
	cl := ticketdtest.Start(t, ticketdtest.Options{
		Nodes: 1,
		TLS:   &ticketdtest.TLS{CertsDir: dir, Client: "admin", ClientCertAuth: true},
	})
	ep := cl.Node(0).APIAddr
	ca := filepath.Join(dir, "ca.crt")
	cert, key := security.ClientFiles("admin")

	dead := func() string {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		require.NoError(t, err)
		defer l.Close()
		return l.Addr().String()
	}
	tests := []struct {
		name, endpoints string
		args            []string
		want            string
	}{
		{"plaintext_to_tls", ep, nil, "the server speaks TLS: pass --cacert"},
		{"untrusted_server", "https://" + ep, nil, "not trusted: pass --cacert"},
		{"no_client_cert", ep, []string{"--cacert", ca}, "pass --cert FILE and --key FILE"},
		{"refused_everywhere", dead() + "," + dead(), nil, "check --endpoints"},
	}
	// watch and elect --observe stream: they once retried silently forever.
	commands := [][]string{{"status"}, {"watch", "jobs/"}, {"elect", "--observe", "leader"}}
	for _, tc := range tests {
		for _, command := range commands {
			t.Run(tc.name+"/"+command[0], func(t *testing.T) {
				code, _, errs := ctl(t, tc.endpoints, append(append([]string{"--timeout", "60s"}, tc.args...), command...)...)
				assert.Equal(t, exitError, code, "stderr %q", errs)
				assert.Contains(t, errs, tc.want)
				assert.NotContains(t, errs, "deadline exceeded", "failed on its cause, not on --timeout")
			})
		}
	}
	// endpoint health names the same fix on each endpoint's line, where it
	// once said only "unexpected EOF".
	for _, tc := range tests[:2] {
		t.Run(tc.name+"/endpoint_health", func(t *testing.T) {
			code, out, errs := ctl(t, tc.endpoints, append(append([]string{"--timeout", "60s"}, tc.args...), "endpoint", "health")...)
			assert.Equal(t, exitError, code, "stderr %q", errs)
			assert.Contains(t, out, tc.want)
		})
	}
	code, _, errs := ctl(t, ep, "--cacert", ca, "--cert", filepath.Join(dir, cert), "--key", filepath.Join(dir, key), "status")
	assert.Equal(t, exitOK, code, "with every setting right: %s", errs)
}
