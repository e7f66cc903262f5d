package config_test

import (
	"testing"

	"github.com/spf13/pflag"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/server/config"
)

func TestSecurityFlagsKeepEtcdNames(t *testing.T) {
	fs := pflag.NewFlagSet("serve", pflag.ContinueOnError)
	config.RegisterFlags(fs)
	require.NoError(t, fs.Parse([]string{
		"--cert-file=/c/node.crt", "--key-file=/c/node.key", "--trusted-ca-file=/c/ca.crt", "--client-cert-auth",
		"--client-crl-file=/c/ca.crl",
		"--peer-cert-file=/c/p.crt", "--peer-key-file=/c/p.key", "--peer-trusted-ca-file=/c/ca.crt", "--peer-crl-file=/c/peer.crl",
		"--metrics-cert-file=/c/m.crt", "--metrics-key-file=/c/m.key",
		"--insecure", "--cors-allowed-origins=https://a.example, https://b.example", "--listen-metrics-addr=127.0.0.1:9100",
		"--limits-max-connections=10", "--limits-stream-write-timeout-ms=2500",
	}))
	c, err := config.Load("", []string{"TICKETD_BODY_READ_TIMEOUT_MS=1", "TICKETD_LIMITS_IDLE_TIMEOUT_MS=5000"}, fs)
	require.NoError(t, err)
	assert.Equal(t, config.TLSFiles{CertFile: "/c/node.crt", KeyFile: "/c/node.key", TrustedCAFile: "/c/ca.crt", ClientCertAuth: true, CRLFile: "/c/ca.crl"}, c.ClientTLS())
	assert.Equal(t, config.TLSFiles{CertFile: "/c/p.crt", KeyFile: "/c/p.key", TrustedCAFile: "/c/ca.crt", ClientCertAuth: true, CommonName: c.ID, CRLFile: "/c/peer.crl"}, c.PeerTLS())
	assert.Equal(t, config.TLSFiles{CertFile: "/c/m.crt", KeyFile: "/c/m.key"}, c.MetricsTLS())
	assert.True(t, c.Insecure)
	assert.Equal(t, []string{"https://a.example", "https://b.example"}, c.CORSAllowedOrigins)
	assert.Equal(t, "127.0.0.1:9100", c.ListenMetricsAddr)
	assert.Equal(t, 10, c.Limits.MaxConnections)
	assert.Equal(t, int64(5000), c.Limits.IdleTimeoutMS)
	assert.Equal(t, int64(2500), c.Limits.StreamWriteTimeoutMS)
	assert.Equal(t, int64(30_000), config.DefaultConfig().Limits.StreamWriteTimeoutMS)
	require.NoError(t, c.Validate())
}

func TestSecurityValidation(t *testing.T) {
	tests := []struct {
		name string
		edit func(c *config.Config)
	}{
		{"cert_without_key", func(c *config.Config) { c.CertFile = "x" }},
		{"client_cert_auth_without_ca", func(c *config.Config) { c.CertFile, c.KeyFile, c.ClientCertAuth = "x", "y", true }},
		{"ca_without_cert", func(c *config.Config) { c.TrustedCAFile = "ca" }},
		{"peer_without_ca", func(c *config.Config) { c.PeerCertFile, c.PeerKeyFile = "x", "y" }},
		{"negative_limit", func(c *config.Config) { c.Limits.MaxConnections = -1 }},
		{"negative_stream_write_timeout", func(c *config.Config) { c.Limits.StreamWriteTimeoutMS = -1 }},
		{"bad_metrics_addr", func(c *config.Config) { c.ListenMetricsAddr = "nope" }},
		{"client_crl_without_ca", func(c *config.Config) { c.CertFile, c.KeyFile, c.ClientCRLFile = "x", "y", "crl" }},
		{"peer_crl_without_peer_tls", func(c *config.Config) { c.PeerCRLFile = "crl" }},
		{"metrics_cert_without_key", func(c *config.Config) { c.ListenMetricsAddr, c.MetricsCertFile = "127.0.0.1:9", "m.crt" }},
		{"metrics_cert_without_addr", func(c *config.Config) { c.MetricsCertFile, c.MetricsKeyFile = "m.crt", "m.key" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := config.DefaultConfig()
			tt.edit(&c)
			assert.ErrorIs(t, c.Validate(), config.ErrInvalid)
		})
	}
}
