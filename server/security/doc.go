// Package security is ticketd's transport security layer: the TLS
// configurations of the client API, of follower-to-leader forwarding and of
// the peer (Raft) transports, with certificate reload; the insecure-exposure
// rule; and the certificate tooling behind `ticketctl cert`. The services and
// both backends' peer transports get their *tls.Config from here, so every
// port follows one policy (docs/design.md#security-model).
//
// It follows etcd's model (client and peer TLS with their own CAs,
// --client-cert-auth) and CockroachDB's refusal to expose a non-loopback
// address without TLS.
//
// # Usage
//
//  1. Build a Reloader per certificate/key/CA triple (NewReloader) and run its
//     Watch loop; it reloads on SIGHUP and when a file changes, keeping the
//     old material when the new one does not load.
//  2. Give ServerConfig (client API), PeerConfig (Raft transports, TLS 1.3,
//     both sides verified) or ClientConfig (dialers) the Reloader: the
//     configs read the current certificate at every handshake (and the API
//     its CA pool too; peers read theirs once).
//  3. Before listening, call CheckExposure with the node's addresses.
//
// Revocation: crl.go parses revocation lists (client_crl_file,
// peer_crl_file; etcd's flags) and accepts one only if a CA of the same
// endpoint's bundle signed it; the Reloader loads it with the certificates
// and ServerConfig and PeerConfig refuse a listed certificate at the
// handshake (CheckRevoked). revoke.go keeps a certs directory's ca.crl for
// `ticketctl cert revoke`. credfile.go refuses key, policy, tokens and
// revocation-list files that another local user could write.
//
// For the client API:
//
//	r, err := security.NewReloader(cfg.ClientTLS(), log)
//	if err != nil { return err }
//	go r.Watch(ctx, security.DefaultPollInterval)
//	srv.TLSConfig = security.ServerConfig(r, cfg.ClientCertAuth)
//
// # Authentication and authorization (docs/security.md#authorization)
//
// Beside the TLS files: principal.go (Principal, from a verified client
// certificate's CN, a bearer token, or a member node's forwarding
// assertion), tokens.go (the tokens file: SHA-256 digests compared in
// constant time, Consul ACL tokens), policy.go (the policy file: read, lock
// and admin on key prefixes, etcd roles on key ranges), authn.go
// (Authenticator: establishes the principal, reloads both files on SIGHUP),
// authz.go (the connect interceptor that refuses with Unauthenticated or
// PermissionDenied and puts the principal in the handler's context) and
// ownership.go (MayActFor: who may act on a lock or session another
// principal holds).
//
//  1. Build one Authenticator per node with NewAuthenticator (a bad file
//     stops the start) and run its Watch loop.
//  2. Record each request's TLS state in its context (WithConnState) in the
//     HTTP layer, and install Interceptor on every handler.
//  3. In handlers, PrincipalFrom gives the caller; MayActFor decides
//     whether it may act on a lock or session bound to another principal.
//
// For a node:
//
//	a, err := security.NewAuthenticator(security.AuthConfig{PolicyFile: p, TokensFile: t, IsMember: isMember})
//	if err != nil { return err }
//	go a.Watch(ctx)
//	opts := connect.WithInterceptors(a.Interceptor())
package security
