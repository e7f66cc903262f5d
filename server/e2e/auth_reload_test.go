package e2e_test

import (
	"os"
	"strings"
	"syscall"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/ticketdtest"
)

// TestPolicyReloadOnSIGHUP changes the policy file of a running secure
// cluster and sends SIGHUP to the real processes: the new policy applies
// without a restart; a broken policy is refused, logged on the audit log,
// and the previous one stays in force.
func TestPolicyReloadOnSIGHUP(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		dir := makeCerts(t, 3, "e2e")
		withoutBob := "rules:\n  - principal: e2e\n    allow: [admin]\n"
		policyFile, authArgs := writeAuthFiles(t, dir, withoutBob)
		c := ticketdtest.Start(t, ticketdtest.Options{
			Backend: backend,
			Args:    append([]string{"--lease-min-ms=10", "--lease-max-ms=120000"}, authArgs...),
			TLS:     &ticketdtest.TLS{CertsDir: dir, Peer: true, Client: "e2e"},
		})
		settle(t, c)
		ctx := ctxT(t)
		bob := clientsAs(t, c, dir, identity{token: bobToken})
		leader := c.Leader(t)
		acquire := func(node int) error {
			res, err := bob.lock[node].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/r", LeaseMs: 60_000, Owner: "bob-r"})
			if err == nil {
				_, err = bob.lock[node].Release(ctx, &ticketv1.ReleaseRequest{Key: "shared/r", Token: res.GetToken()})
			}
			return err
		}
		hangup := func() {
			for i := range c.Len() {
				require.NoError(t, syscall.Kill(c.Node(i).PID(), syscall.SIGHUP))
			}
		}
		logged := func(msg string) int {
			n := 0
			for i := range c.Len() {
				b, err := os.ReadFile(c.Node(i).LogFile)
				require.NoError(t, err)
				n += strings.Count(string(b), `"msg":"`+msg+`"`)
			}
			return n
		}

		requireCode(t, connect.CodePermissionDenied, acquire(leader))

		require.NoError(t, os.WriteFile(policyFile, []byte(authPolicy), 0o600))
		hangup()
		eventually(t, func() bool { return logged("policy reloaded") == c.Len() }, "every node reloads the policy")
		for i := range c.Len() {
			require.NoError(t, acquire(i), "bob may lock under shared/ after the reload (node %d)", i)
		}

		require.NoError(t, os.WriteFile(policyFile, []byte("rules:\n  - principal: bob\n    allow: [superuser]\n"), 0o600))
		hangup()
		eventually(t, func() bool { return logged("policy reload failed; keeping the previous policy and tokens") == c.Len() }, "every node refuses the broken policy")
		require.Len(t, c.Running(), c.Len(), "a broken policy does not stop a node")
		for i := range c.Len() {
			require.NoError(t, acquire(i), "the previous policy stays in force (node %d)", i)
		}
	})
}
