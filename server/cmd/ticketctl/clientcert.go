package main

import (
	"crypto/tls"
	"fmt"
	"os"

	"github.com/spf13/cobra"

	"github.com/ticketd/ticketd/server/security"
)

// ticketctl's client-certificate variables. They are not ticketd's server
// settings (TICKETD_CERT_FILE, TICKETD_KEY_FILE: the node's own certificate
// and key), which a ticketd container sets in its environment: a ticketctl
// run inside it (kubectl exec) must not take the node's key for its client
// key. TICKETD_CERT is still read for the certificate; TICKETD_KEY_FILE is
// read for the key only together with TICKETD_CERT, the pair that named the
// client's files before TICKETD_CLIENT_CERT and TICKETD_CLIENT_KEY.
const (
	envClientCert = "TICKETD_CLIENT_CERT"
	envClientKey  = "TICKETD_CLIENT_KEY"
	envOldCert    = "TICKETD_CERT"
	envOldKey     = "TICKETD_KEY_FILE"
)

// setting is a path and where it came from ("--cert", or the name of the
// environment variable), so that an error about the path names what to fix.
type setting struct{ path, from string }

// envSetting returns the first of the variables names that is set.
func envSetting(names ...string) setting {
	for _, n := range names {
		if v := os.Getenv(n); v != "" {
			return setting{path: v, from: n}
		}
	}
	return setting{}
}

// clientCertEnv returns the default --cert and --key from the environment
// (see the variables above).
func clientCertEnv() (cert, key setting) {
	cert = envSetting(envClientCert, envOldCert)
	key = envSetting(envClientKey)
	if key.path == "" && cert.from == envOldCert {
		key = envSetting(envOldKey)
	}
	return cert, key
}

// noteFlagSources records that --cacert, --cert or --key was given on the
// command line, which wins over its variable.
func (g *globals) noteFlagSources(cmd *cobra.Command) {
	for name, from := range map[string]*string{"cacert": &g.cacertFrom, "cert": &g.certFrom, "key": &g.keyFrom} {
		if f := cmd.Flags().Lookup(name); f != nil && f.Changed {
			*from = "--" + name
		}
	}
}

// describe is a path with where it came from, for errors.
func describe(path, from string) string {
	if from == "" {
		return fmt.Sprintf("%q", path)
	}
	return fmt.Sprintf("%q (from %s)", path, from)
}

// loadClientTLS loads the CA and the client certificate the settings name.
// A certificate without its key (or a key without its certificate) is a
// usage error; a file that cannot be used is reported with the flag or
// variable that named it.
func (g *globals) loadClientTLS() (*tls.Config, error) {
	switch {
	case g.cert != "" && g.key == "":
		return nil, usagef("client certificate %s given without its key: pass --key FILE (or %s)", describe(g.cert, g.certFrom), envClientKey)
	case g.key != "" && g.cert == "":
		return nil, usagef("client key %s given without its certificate: pass --cert FILE (or %s)", describe(g.key, g.keyFrom), envClientCert)
	}
	tc, err := security.LoadClientConfig(g.cacert, g.cert, g.key)
	if err != nil {
		return nil, fmt.Errorf("client TLS settings: CA %s, certificate %s, key %s: %w",
			describe(g.cacert, g.cacertFrom), describe(g.cert, g.certFrom), describe(g.key, g.keyFrom), err)
	}
	return tc, nil
}
