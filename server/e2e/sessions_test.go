package e2e_test

import (
	"strconv"
	"strings"
	"testing"

	"connectrpc.com/connect"
	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
)

// TestSessionAuthorization runs three real nodes with client TLS, peer
// mutual TLS, a policy and a tokens file, and checks the session rules of
// docs/security.md#sessions-are-bound-to-their-principal: a session is
// bound to the principal that opened it; another
// principal can neither keep it alive, close it nor acquire under it (on
// the leader or through a follower), and is answered as for a session that
// does not exist; opening one needs the lock permission
// on some prefix; an admin may close anyone's session, which releases its
// locks. Every refusal leaves the lock table, the log and the membership as
// they were.
func TestSessionAuthorization(t *testing.T) {
	matrix(t, func(t *testing.T, backend string) {
		c, dir := startAuthCluster(t, backend)
		ctx := ctxT(t)
		leader := c.Leader(t)
		follower := (leader + 1) % c.Len()

		admin := clientsAs(t, c, dir, identity{cert: "e2e"})
		alice := clientsAs(t, c, dir, identity{cert: "alice"})
		bob := clientsAs(t, c, dir, identity{token: bobToken})
		anon := clientsAs(t, c, dir, identity{})
		mallory := clientsAs(t, c, dir, identity{cert: "mallory"}) // no rule names mallory

		s, err := alice.lock[follower].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
		require.NoError(t, err, "forwarded to the leader with alice's principal")
		id := s.GetSession()
		held, err := alice.lock[leader].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/s", Owner: "alice-s", Session: id})
		require.NoError(t, err)
		require.Equal(t, id, held.GetSession())

		refused := func(t *testing.T, code connect.Code, call func() error) {
			t.Helper()
			before := stateOf(t, c, admin, leader)
			requireCode(t, code, call())
			requireSameState(t, before, stateOf(t, c, admin, leader))
		}
		t.Run("other_principal_cannot_keep_alive_or_close", func(t *testing.T) {
			// Another principal's session is answered exactly as a session
			// that never existed (code and message, the id aside), so
			// nobody can probe which session ids are open.
			unknown := id + 1_000_000
			asUnknown := func(t *testing.T, got error, call func(session uint64) error) {
				t.Helper()
				want := call(unknown)
				requireCode(t, connect.CodeNotFound, want)
				requireCode(t, connect.CodeNotFound, got)
				var g, w *connect.Error
				require.ErrorAs(t, got, &g)
				require.ErrorAs(t, want, &w)
				assert.Equal(t, strings.ReplaceAll(w.Message(), strconv.FormatUint(unknown, 10), "ID"),
					strings.ReplaceAll(g.Message(), strconv.FormatUint(id, 10), "ID"))
			}
			for _, node := range []int{leader, follower} {
				keepAlive := func(session uint64) error {
					_, err := bob.lock[node].KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: session})
					return err
				}
				closeSession := func(session uint64) error {
					_, err := bob.lock[node].CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: session})
					return err
				}
				acquire := func(session uint64) error {
					_, err := bob.lock[node].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/b", Owner: "bob-b", Session: session})
					return err
				}
				for _, call := range []func(uint64) error{keepAlive, closeSession, acquire} {
					var got error
					refused(t, connect.CodeNotFound, func() error { got = call(id); return got })
					asUnknown(t, got, call)
				}
			}
			adminKeepAlive := func(session uint64) error {
				_, err := admin.lock[leader].KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: session})
				return err // a session is its client's liveness: nobody else vouches for it
			}
			var got error
			refused(t, connect.CodeNotFound, func() error { got = adminKeepAlive(id); return got })
			asUnknown(t, got, adminKeepAlive)
		})
		t.Run("other_principal_cannot_acquire_under_it", func(t *testing.T) {
			for _, node := range []int{leader, follower} {
				// Refused on the leader before anything is proposed: the
				// log does not grow (requireSameState compares it too).
				refused(t, connect.CodeNotFound, func() error {
					_, err := bob.lock[node].Acquire(ctx, &ticketv1.AcquireRequest{Key: "shared/b", Owner: "bob-b", Session: id})
					return err
				})
			}
		})
		t.Run("other_principal_cannot_renew_its_lock", func(t *testing.T) {
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := bob.lock[leader].Renew(ctx, &ticketv1.RenewRequest{Key: "shared/s", Token: held.GetToken()})
				return err
			})
		})
		t.Run("create_needs_lock_somewhere", func(t *testing.T) {
			refused(t, connect.CodePermissionDenied, func() error {
				_, err := mallory.lock[leader].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
				return err
			})
			refused(t, connect.CodeUnauthenticated, func() error {
				_, err := anon.lock[leader].CreateSession(ctx, &ticketv1.CreateSessionRequest{TtlMs: 60_000})
				return err
			})
			refused(t, connect.CodeUnauthenticated, func() error {
				_, err := anon.lock[leader].KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
				return err
			})
		})
		t.Run("owner_keeps_alive_and_renew_is_refused", func(t *testing.T) {
			ka, err := alice.lock[follower].KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
			require.NoError(t, err)
			assert.Equal(t, int64(60_000), ka.GetTtlMs())
			_, err = alice.lock[leader].Renew(ctx, &ticketv1.RenewRequest{Key: "shared/s", Token: held.GetToken()})
			requireCode(t, connect.CodeFailedPrecondition, err)
		})
		t.Run("admin_closes_anyones_session", func(t *testing.T) {
			_, err := admin.lock[follower].CloseSession(ctx, &ticketv1.CloseSessionRequest{Session: id})
			require.NoError(t, err)
			got, err := admin.lock[leader].GetLock(ctx, &ticketv1.GetLockRequest{Key: "shared/s"})
			require.NoError(t, err)
			assert.False(t, got.GetHeld(), "closing the session released its lock")
			_, err = alice.lock[leader].KeepAlive(ctx, &ticketv1.KeepAliveRequest{Session: id})
			requireCode(t, connect.CodeNotFound, err)
		})
	})
}
