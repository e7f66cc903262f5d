package harness

import (
	"fmt"
	"testing"

	"github.com/ticketd/ticketd/sdk/ticketdtest"
	"github.com/ticketd/ticketd/server/security/securitytest"
)

// faultsClient is the client certificate (CN, so principal) the workers and
// the nemesis present in a run with Config.TLS.
const faultsClient = "faults"

// tlsOptions makes the certificates of an n-node run with Config.TLS and
// returns how ticketdtest starts it: client TLS with client-certificate
// authentication and mutual TLS between peers (docs/security.md), every call of the
// run made with the faults client certificate.
func tlsOptions(t *testing.T, nodes int) *ticketdtest.TLS {
	t.Helper()
	ids := make([]string, nodes)
	for i := range ids {
		ids[i] = fmt.Sprintf("n%d", i+1) // ticketdtest's node ids
	}
	return &ticketdtest.TLS{
		CertsDir:       securitytest.Certs(t, ids, faultsClient),
		ClientCertAuth: true,
		Peer:           true,
		Client:         faultsClient,
	}
}
