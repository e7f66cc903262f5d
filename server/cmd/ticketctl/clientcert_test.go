package main

import (
	"os"
	"path/filepath"
	"regexp"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/security"
)

// TestRunsInsideANodeContainer: ticketctl run in a ticketd container
// (kubectl exec, docs/operations.md "Deploying") has the node's own TLS
// settings in its environment, as deploy/kubernetes/statefulset.yaml sets
// them: TICKETD_CERT_FILE and TICKETD_KEY_FILE are the node's certificate
// and key, not a client certificate. The documented command, --cacert and
// status, works there against a real TLS node. Not parallel: it sets the
// environment.
func TestRunsInsideANodeContainer(t *testing.T) {
	dir := t.TempDir()
	_, err := security.CreateCA(dir, time.Hour, false)
	require.NoError(t, err)
	_, err = security.CreateNode(dir, "n1", []string{"127.0.0.1"}, time.Hour, false)
	require.NoError(t, err)
	cl := ticketdtest.Start(t, ticketdtest.Options{Nodes: 1, TLS: &ticketdtest.TLS{CertsDir: dir}})
	ep := cl.Node(0).APIAddr
	ca := filepath.Join(dir, "ca.crt")
	nodeCert, nodeKey := filepath.Join(dir, "node-n1.crt"), filepath.Join(dir, "node-n1.key")
	require.FileExists(t, nodeKey)

	// The pod's TLS variables, read from the StatefulSet, with its mounted
	// files (/etc/ticketd/tls/...) mapped to this node's.
	manifest, err := os.ReadFile(filepath.Join("..", "..", "..", "deploy", "kubernetes", "statefulset.yaml"))
	require.NoError(t, err)
	files := map[string]string{".crt": nodeCert, ".key": nodeKey}
	set := 0
	for _, m := range regexp.MustCompile(`- name: (TICKETD_\w+)\s+value: (/etc/ticketd/tls/\S+)`).FindAllStringSubmatch(string(manifest), -1) {
		path := files[filepath.Ext(m[2])]
		if filepath.Base(m[2]) == "ca.crt" {
			path = ca
		}
		t.Setenv(m[1], path)
		set++
	}
	require.NotZero(t, set, "the StatefulSet's TLS variables")
	require.NotEmpty(t, os.Getenv("TICKETD_KEY_FILE"), "the node's key, as the StatefulSet sets it")
	code, out, errs := ctl(t, ep, "--cacert", ca, "status")
	require.Equal(t, exitOK, code, "stdout %q stderr %q", out, errs)
}

// TestClientCertErrorsNameTheirSource: a client certificate that cannot be
// used is reported with the flag or variable that named each path, and a
// certificate without its key (or the reverse) is a usage error naming the
// missing half.
func TestClientCertErrorsNameTheirSource(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "absent.crt")
	t.Setenv("TICKETD_CLIENT_CERT", missing)
	t.Setenv("TICKETD_CLIENT_KEY", missing)
	code, _, errs := ctl(t, "127.0.0.1:1", "status")
	assert.Equal(t, exitError, code, errs)
	assert.Contains(t, errs, "(from TICKETD_CLIENT_CERT)")
	assert.Contains(t, errs, "(from TICKETD_CLIENT_KEY)")

	code, _, errs = ctl(t, "127.0.0.1:1", "--key", missing, "status")
	assert.Equal(t, exitError, code, errs)
	assert.Contains(t, errs, "(from --key)")

	require.NoError(t, os.Unsetenv("TICKETD_CLIENT_KEY"))
	code, _, errs = ctl(t, "127.0.0.1:1", "status")
	assert.Equal(t, exitUsage, code, errs)
	assert.Contains(t, errs, "given without its key: pass --key FILE")
}
