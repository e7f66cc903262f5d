package backends_test

import (
	"crypto/tls"
	"errors"
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
	"github.com/ticketd/ticketd/core"
)

func TestValidatePeerTLSAndMaxMessageBytes(t *testing.T) {
	pki := backendtest.NewPKI(t, "peer CA")
	base := func() backends.Config {
		c := backends.DefaultConfig()
		c.ID, c.RaftAddr, c.DataDir = "n1", "127.0.0.1:7101", t.TempDir()
		c.StateMachine = core.NewStateMachine()
		return c
	}
	good := pki.PeerTLS(t, "n1")
	for _, tc := range []struct {
		name string
		edit func(*backends.Config)
		ok   bool
	}{
		{"no_tls", func(*backends.Config) {}, true},
		{"mutual_tls", func(c *backends.Config) { c.PeerTLS = good }, true},
		{"no_certificate", func(c *backends.Config) {
			x := good.Clone()
			x.Certificates = nil
			c.PeerTLS = x
		}, false},
		{"no_client_cas", func(c *backends.Config) {
			x := good.Clone()
			x.ClientCAs = nil
			c.PeerTLS = x
		}, false},
		{"client_cert_not_required", func(c *backends.Config) {
			x := good.Clone()
			x.ClientAuth = tls.VerifyClientCertIfGiven
			c.PeerTLS = x
		}, false},
		{"insecure_skip_verify", func(c *backends.Config) {
			x := good.Clone()
			x.InsecureSkipVerify = true
			c.PeerTLS = x
		}, false},
		{"max_message_too_small", func(c *backends.Config) { c.MaxMessageBytes = 1024 }, false},
		{"max_message_too_large", func(c *backends.Config) { c.MaxMessageBytes = 2 << 30 }, false},
		{"max_message_default", func(c *backends.Config) { c.MaxMessageBytes = backends.DefaultMaxMessageBytes }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := base()
			tc.edit(&c)
			err := c.Validate()
			if tc.ok && err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if !tc.ok && !errors.Is(err, backends.ErrInvalidConfig) {
				t.Fatalf("Validate: %v, want ErrInvalidConfig", err)
			}
		})
	}
	if got := (backends.Config{}).WithDefaults().MaxMessageBytes; got != backends.DefaultMaxMessageBytes {
		t.Fatalf("default MaxMessageBytes %d", got)
	}
}

func TestPeerClientAndServerTLS(t *testing.T) {
	pki := backendtest.NewPKI(t, "peer CA")
	in := pki.PeerTLS(t, "n1")
	in.MinVersion = tls.VersionTLS12
	s := backends.PeerServerTLS(in)
	c := backends.PeerClientTLS(in, "127.0.0.1")
	if s.MinVersion != tls.VersionTLS13 || c.MinVersion != tls.VersionTLS13 {
		t.Fatalf("min versions %x %x, want TLS 1.3", s.MinVersion, c.MinVersion)
	}
	if s.ClientAuth != tls.RequireAndVerifyClientCert || c.ServerName != "127.0.0.1" || c.ClientCAs != nil {
		t.Fatalf("server %v, client %q", s.ClientAuth, c.ServerName)
	}
	if in.MinVersion != tls.VersionTLS12 {
		t.Fatal("input config modified")
	}
	if backends.PeerServerTLS(nil) != nil || backends.PeerClientTLS(nil, "x") != nil {
		t.Fatal("nil in, non-nil out")
	}
}
