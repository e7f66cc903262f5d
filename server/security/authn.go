package security

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"go.uber.org/zap"
)

// AuthConfig configures an Authenticator.
type AuthConfig struct {
	// PolicyFile is the YAML policy (--auth-policy-file). Empty:
	// authorization off, every request served as before.
	PolicyFile string
	// TokensFile is the YAML bearer-token file (--auth-tokens-file), SHA-256
	// digests only. Empty: principals come from client certificates only.
	TokensFile string
	// IsMember reports whether id is a current member of the cluster. A
	// principal asserted in PrincipalHeader is believed only from a
	// connection whose node certificate's CN is a member. Nil: never
	// believed. Called concurrently.
	IsMember func(id string) bool
	// Audit receives policy reloads (logger name "audit" by convention).
	// Nil: no log.
	Audit *zap.Logger
	// OnReload, if set, is called after every successful Reload, once the
	// new policy and tokens are in use: long-lived streams authorized under
	// the old ones (Watch) must be ended there, so that a revoked principal
	// keeps nothing open. Nil: nothing.
	OnReload func()
}

// Authenticator establishes each request's Principal and decides, from the
// policy, what it may do. Policy and tokens are replaced as a whole by
// Reload (SIGHUP); a failed reload keeps the old ones. Safe for concurrent
// use.
type Authenticator struct {
	cfg AuthConfig

	mu     sync.RWMutex
	policy *Policy // nil: authorization off
	tokens *Tokens
}

// NewAuthenticator loads cfg's files. Errors: ErrBadPolicy, ErrBadTokens,
// ErrInsecureFile (a file another local user could write), or the file
// system's, with the file name; a node must not start with them.
func NewAuthenticator(cfg AuthConfig) (*Authenticator, error) {
	if cfg.Audit == nil {
		cfg.Audit = zap.NewNop()
	}
	a := &Authenticator{cfg: cfg}
	policy, tokens, err := a.load()
	if err != nil {
		return nil, err
	}
	a.policy, a.tokens = policy, tokens
	return a, nil
}

// load reads and parses both files.
func (a *Authenticator) load() (*Policy, *Tokens, error) {
	var (
		policy *Policy
		tokens = &Tokens{}
	)
	if f := a.cfg.PolicyFile; f != "" {
		data, err := readCredentialFile("policy file", f)
		if err != nil {
			return nil, nil, err
		}
		if policy, err = ParsePolicy(data); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	if f := a.cfg.TokensFile; f != "" {
		data, err := readCredentialFile("tokens file", f)
		if err != nil {
			return nil, nil, err
		}
		if tokens, err = ParseTokens(data); err != nil {
			return nil, nil, fmt.Errorf("%s: %w", f, err)
		}
	}
	return policy, tokens, nil
}

// Enabled reports whether authorization is on (a policy file was given).
func (a *Authenticator) Enabled() bool {
	if a == nil {
		return false
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.policy != nil
}

// Policy returns the current policy (nil when authorization is off).
func (a *Authenticator) Policy() *Policy {
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.policy
}

// Reload reads the policy and tokens files again and swaps them in at once.
// On an error both old ones stay in use; the error is logged on the audit
// log and returned. by names who asked (e.g. "SIGHUP"), for the audit log.
func (a *Authenticator) Reload(by string) error {
	policy, tokens, err := a.load()
	if err != nil {
		a.cfg.Audit.Error("policy reload failed; keeping the previous policy and tokens",
			zap.String("principal", by), zap.Error(err))
		return err
	}
	a.mu.Lock()
	a.policy, a.tokens = policy, tokens
	a.mu.Unlock()
	if a.cfg.OnReload != nil {
		a.cfg.OnReload()
	}
	rules, quotas := 0, 0
	if policy != nil {
		rules, quotas = len(policy.rules), len(policy.quotas)
	}
	a.cfg.Audit.Info("policy reloaded", zap.String("principal", by),
		zap.String("policy_file", a.cfg.PolicyFile), zap.Int("rules", rules), zap.Int("quotas", quotas),
		zap.String("tokens_file", a.cfg.TokensFile), zap.Int("tokens", tokens.Len()))
	return nil
}

// Watch calls Reload("SIGHUP") on every SIGHUP until ctx ends (beside the
// certificate Reloader's own SIGHUP handling: one signal reloads both). Run
// it in its own goroutine.
func (a *Authenticator) Watch(ctx context.Context) {
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	for {
		select {
		case <-ctx.Done():
			return
		case <-hup:
			_ = a.Reload("SIGHUP")
		}
	}
}

// Authenticate establishes the principal of a request from its headers and
// its connection's TLS state (WithConnState on ctx), in this order:
//
//  1. PrincipalHeader: believed only when the connection's verified client
//     certificate is a node certificate whose CN is a current member (a
//     follower forwarding its caller's principal); otherwise the request is
//     refused with ErrForwardedPrincipal, never served as someone else.
//  2. `Authorization: Bearer <token>`: the token's principal in the tokens
//     file; an unknown token is ErrUnauthenticated, even with a certificate.
//  3. The CN of the verified client certificate.
//
// A principal that could not be stored with a lock (core.ValidatePrincipal:
// too long, control characters) is refused. Errors wrap ErrUnauthenticated
// (ErrForwardedPrincipal wraps it too).
func (a *Authenticator) Authenticate(ctx context.Context, h http.Header) (Principal, error) {
	p, err := a.authenticate(ctx, h)
	if err != nil {
		return Principal{}, err
	}
	if err := validatePrincipalName(p.Name); err != nil {
		return Principal{}, fmt.Errorf("%w: %s principal: %v", ErrUnauthenticated, p.Source, err)
	}
	return p, nil
}

// authenticate is Authenticate before the principal's name is checked.
func (a *Authenticator) authenticate(ctx context.Context, h http.Header) (Principal, error) {
	leaf := VerifiedLeaf(ConnStateFrom(ctx))
	if asserted := h.Get(PrincipalHeader); asserted != "" {
		if leaf == nil || !IsNodeCertificate(leaf) || a.cfg.IsMember == nil || !a.cfg.IsMember(leaf.Subject.CommonName) {
			return Principal{}, fmt.Errorf("%w: %w", ErrUnauthenticated, ErrForwardedPrincipal)
		}
		return Principal{Name: asserted, Source: SourceForwarded}, nil
	}
	if auth := h.Get("Authorization"); auth != "" {
		scheme, token, ok := strings.Cut(auth, " ")
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			return Principal{}, fmt.Errorf("%w: Authorization is not a bearer token", ErrUnauthenticated)
		}
		a.mu.RLock()
		tokens := a.tokens
		a.mu.RUnlock()
		name, found := tokens.Lookup(strings.TrimSpace(token))
		if !found {
			return Principal{}, fmt.Errorf("%w: unknown bearer token", ErrUnauthenticated)
		}
		return Principal{Name: name, Source: SourceToken}, nil
	}
	if leaf != nil && leaf.Subject.CommonName != "" {
		return Principal{Name: leaf.Subject.CommonName, Source: SourceCertificate}, nil
	}
	return Principal{}, fmt.Errorf("%w: no client certificate and no bearer token", ErrUnauthenticated)
}

// currentPolicy is the policy in use, nil when off (or a is nil).
func (a *Authenticator) currentPolicy() *Policy {
	if a == nil {
		return nil
	}
	a.mu.RLock()
	defer a.mu.RUnlock()
	return a.policy
}
