package server

import (
	"context"
	"fmt"

	"go.uber.org/zap"

	"github.com/ticketd/ticketd/core"
	"github.com/ticketd/ticketd/server/security"
	"github.com/ticketd/ticketd/server/watch"
)

// This file wires authentication and authorization
// (docs/security.md#authorization) into a node: the Authenticator built from
// auth_policy_file and auth_tokens_file, the principal a Grant is bound to,
// the check that only a lock's principal (or an admin) renews or releases it,
// and the audit log.

// newAuthenticator loads the node's policy and tokens files and reloads them
// on SIGHUP until the node closes. A forwarded principal is believed only
// from a node certificate whose CN is a current member (hasMember).
func (n *Node) newAuthenticator() (*security.Authenticator, error) {
	a, err := security.NewAuthenticator(security.AuthConfig{
		PolicyFile: n.cfg.AuthPolicyFile,
		TokensFile: n.cfg.AuthTokensFile,
		IsMember:   n.hasMember,
		Audit:      n.audit(),
		// A revoked principal must not keep a watch open: end every watch,
		// each client resumes and is authorized under the new policy.
		OnReload: func() { n.hub.EndAll(watch.ErrCredentialsChanged) },
	})
	if err != nil {
		return nil, err
	}
	if n.cfg.AuthPolicyFile == "" && n.cfg.AuthTokensFile != "" {
		n.log.Warn("auth_tokens_file is set but auth_policy_file is not: authorization is off and tokens are not checked")
	}
	if n.cfg.AuthTokensFile != "" && !n.cfg.ClientTLS().Enabled() {
		// A bearer token is a password: over plaintext anyone on the path
		// reads it and replays it (etcd and Consul warn likewise).
		n.log.Warn("auth_tokens_file is set but the client API has no TLS (cert_file): bearer tokens cross the network in the clear",
			zap.String("auth_tokens_file", n.cfg.AuthTokensFile), zap.String("api_addr", n.cfg.APIAddr))
	}
	if n.cfg.AuthPolicyFile != "" || n.cfg.AuthTokensFile != "" {
		go a.Watch(n.life)
	}
	return a, nil
}

// authn returns the node's Authenticator, kept by its HTTP side (nil
// before secure ran: every check then allows, as with authorization off).
func (n *Node) authn() *security.Authenticator { return n.http.Auth() }

// grantPrincipal is the principal an Acquire's Grant is bound to: the
// caller's when authorization is on, "" otherwise (today's behaviour).
func (n *Node) grantPrincipal(ctx context.Context) string {
	if !n.authn().Enabled() {
		return ""
	}
	p, _ := security.PrincipalFrom(ctx)
	return p.Name
}

// mayTouch refuses, with security.ErrPermissionDenied, a Renew or Release by
// a principal other than the one that acquired the holder (key, token)
// (admins excepted). It is checked on the leader before anything is proposed.
func (n *Node) mayTouch(ctx context.Context, key string, token uint64) error {
	lk, ok := n.sm.Holder(key, token)
	if !ok {
		return nil
	}
	return n.mayTouchLock(ctx, lk)
}

// mayTouchLock is mayTouch for a lock the caller has just read from the
// table (Release: no second lookup on the hot path).
func (n *Node) mayTouchLock(ctx context.Context, lk core.Lock) error {
	if n.authn().MayActFor(ctx, lk.Principal, true) {
		return nil
	}
	p, _ := security.PrincipalFrom(ctx)
	return security.ToConnect(fmt.Errorf("%w: the lock on %q (token %d) was acquired by another principal than %q",
		security.ErrPermissionDenied, lk.Key, lk.Token, p.Name))
}

// audit is the audit log: membership and leadership changes, force-releases
// and policy reloads, each with the calling principal.
func (n *Node) audit() *zap.Logger { return n.log.Named("audit") }

// principalField is the zap field naming the principal of ctx ("" when
// unauthenticated or authorization is off).
func principalField(ctx context.Context) zap.Field {
	p, _ := security.PrincipalFrom(ctx)
	return zap.String("principal", p.Name)
}

// holderID is the identity the wait queue compares to tell a retry from
// another client: the owner string and, when authorization is on, the
// principal, so that the same owner from another principal is not a retry
// (it waits, or gets AlreadyExists). Owners and principals have no control
// characters (core.ValidateOwner, security's parsers), so the separator is
// unambiguous.
func holderID(owner, principal string) string {
	if principal == "" {
		return owner
	}
	return owner + "\x00" + principal
}
