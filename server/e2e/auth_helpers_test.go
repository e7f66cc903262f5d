package e2e_test

import (
	"context"
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/security"
)

// authPolicy is the policy of the authorization tests: the cluster's own
// test client (certificate "e2e") is admin; alice (certificate) and bob
// (token) may lock under shared/; everyone may read public/.
const authPolicy = `
rules:
  - principal: e2e
    allow: [admin]
  - principal: alice
    prefix: "shared/"
    allow: [lock]
  - principal: bob
    prefix: "shared/"
    allow: [lock]
  - principal: "*"
    prefix: "public/"
    allow: [read]
`

// Bearer tokens of the tests (the tokens file holds their digests only).
const (
	bobToken   = "bob-0123456789abcdef"
	opsToken   = "ops-0123456789abcdef"
	wrongToken = "bob-0123456789abcdeX"
)

// writeAuthFiles writes the policy and a tokens file (bob, ops) into dir
// and returns the ticketd flags naming them.
func writeAuthFiles(t *testing.T, dir, policy string) (policyFile string, args []string) {
	t.Helper()
	policyFile = filepath.Join(dir, "policy.yaml")
	require.NoError(t, os.WriteFile(policyFile, []byte(policy), 0o600))
	tokensFile := filepath.Join(dir, "tokens.yaml")
	tokens := "tokens:\n" +
		"  - principal: bob\n    sha256: " + security.TokenDigest(bobToken) + "\n" +
		"  - principal: ops\n    sha256: " + security.TokenDigest(opsToken) + "\n"
	require.NoError(t, os.WriteFile(tokensFile, []byte(tokens), 0o600))
	return policyFile, []string{"--auth-policy-file", policyFile, "--auth-tokens-file", tokensFile}
}

// identity is how a test client authenticates: a client certificate of
// certsDir (cert), a bearer token, extra headers (spoof attempts), or none.
type identity struct {
	cert     string
	nodeCert string // a node's certificate (node-<id>.crt) instead of a client's
	token    string
	headers  map[string]string
}

// authClients are connect clients of every node of c, authenticating as id.
type authClients struct {
	lock    []ticketv1connect.LockServiceClient
	cluster []ticketv1connect.ClusterServiceClient
}

func clientsAs(t *testing.T, c *ticketdtest.Cluster, certsDir string, id identity) authClients {
	t.Helper()
	cfg, err := (&ticketdtest.TLS{CertsDir: certsDir}).ClientConfig()
	require.NoError(t, err)
	if id.cert != "" || id.nodeCert != "" {
		base := filepath.Join(certsDir, "client."+id.cert)
		if id.nodeCert != "" {
			base = filepath.Join(certsDir, "node-"+id.nodeCert)
		}
		kp, err := tls.LoadX509KeyPair(base+".crt", base+".key")
		require.NoError(t, err)
		cfg.Certificates = []tls.Certificate{kp}
	}
	hc := ticketdtest.TLSClient(cfg)
	t.Cleanup(hc.CloseIdleConnections)
	opts := []connect.ClientOption{connect.WithInterceptors(headerInterceptor(id))}
	var out authClients
	for i := range c.Len() {
		out.lock = append(out.lock, ticketv1connect.NewLockServiceClient(hc, c.URL(i), opts...))
		out.cluster = append(out.cluster, ticketv1connect.NewClusterServiceClient(hc, c.URL(i), opts...))
	}
	return out
}

// headerInterceptor sets id's token and headers on every unary request.
func headerInterceptor(id identity) connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			if id.token != "" {
				req.Header().Set("Authorization", "Bearer "+id.token)
			}
			for k, v := range id.headers {
				req.Header().Set(k, v)
			}
			return next(ctx, req)
		}
	}
}

// startAuthCluster starts and settles three real nodes of backend with
// client TLS, peer mutual TLS, authPolicy and the tokens file, leases from
// 10 ms to 120 s, certificates for "e2e" (admin), "alice" and "mallory"
// (named by no rule); it returns the cluster and the certificates' folder.
func startAuthCluster(t *testing.T, backend string) (*ticketdtest.Cluster, string) {
	t.Helper()
	dir := makeCerts(t, 3, "e2e", "alice", "mallory")
	_, authArgs := writeAuthFiles(t, dir, authPolicy)
	c := ticketdtest.Start(t, ticketdtest.Options{
		Backend: backend,
		Args:    append([]string{"--lease-min-ms=10", "--lease-max-ms=120000"}, authArgs...),
		TLS:     &ticketdtest.TLS{CertsDir: dir, Peer: true, Client: "e2e"},
	})
	settle(t, c)
	return c, dir
}
