package securitytest

import (
	"testing"
	"time"

	"github.com/ticketd/ticketd/server/security"
)

// validity is how long the test certificates are valid; a test never runs
// that long, and a short validity keeps a leaked test key useless.
const validity = time.Hour

// Certs writes into a new temporary directory of t (removed when t ends) a
// CA (ca.crt, ca.key), a node certificate for each id in nodeIDs valid for
// 127.0.0.1 and localhost (node-<id>.crt/.key, usable as server and client
// certificate, so also for peer mutual TLS), and a client certificate for
// each name in clients (client.<name>.crt/.key, CN = name = principal). Keys
// are 0600. It returns the directory, and fails t if a file cannot be made.
func Certs(t testing.TB, nodeIDs []string, clients ...string) string {
	t.Helper()
	dir := t.TempDir()
	if _, err := security.CreateCA(dir, validity, false); err != nil {
		t.Fatalf("securitytest: CA: %v", err)
	}
	for _, id := range nodeIDs {
		if _, err := security.CreateNode(dir, id, []string{"127.0.0.1", "localhost"}, validity, false); err != nil {
			t.Fatalf("securitytest: node %s: %v", id, err)
		}
	}
	for _, name := range clients {
		if _, err := security.CreateClient(dir, name, validity, false); err != nil {
			t.Fatalf("securitytest: client %s: %v", name, err)
		}
	}
	return dir
}
