package harness

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/ticketd/ticketd/server/security"
)

// faultsToken is the bearer token of the workers and the nemesis when a run
// has Config.Auth; the nodes' tokens file holds its digest only.
const faultsToken = "ticketd-faults-workload-token"

// authPolicy gives the run's principal lock on every key and admin (the
// nemesis transfers leadership and reads Status), and nothing to anyone
// else: every request of the run is authenticated and authorized, and the
// locks are bound to that principal
// (docs/security.md#locks-are-bound-to-their-principal).
const authPolicy = `rules:
  - principal: faults
    prefix: ""
    allow: [lock]
  - principal: faults
    allow: [admin]
`

// authArgs writes the policy and tokens files of an authorized run into a
// temp dir of t and returns the `ticketd serve` flags naming them.
func authArgs(t *testing.T) []string {
	t.Helper()
	dir := t.TempDir()
	policy := filepath.Join(dir, "policy.yaml")
	tokens := filepath.Join(dir, "tokens.yaml")
	if err := os.WriteFile(policy, []byte(authPolicy), 0o600); err != nil {
		t.Fatal(err)
	}
	entry := "tokens:\n  - principal: faults\n    sha256: " + security.TokenDigest(faultsToken) + "\n"
	if err := os.WriteFile(tokens, []byte(entry), 0o600); err != nil {
		t.Fatal(err)
	}
	return []string{"--auth-policy-file", policy, "--auth-tokens-file", tokens}
}
