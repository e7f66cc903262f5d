package security

import "errors"

// Sentinel errors of package security. Compare with errors.Is.
var (
	// ErrNoCertificate: a PEM file holds no certificate, or the key does not
	// match it.
	ErrNoCertificate = errors.New("security: no usable certificate")
	// ErrWrongNode: a peer certificate's CN is not this node's id. Peers
	// accept a certificate only as the member its CN names, so a node
	// with another node's certificate (or one shared by all) could not
	// talk; it refuses to start, and a reload to such a certificate is
	// refused.
	ErrWrongNode = errors.New("security: peer certificate names another node")
	// ErrNoCA: a CA bundle holds no certificate.
	ErrNoCA = errors.New("security: no CA certificate")
	// ErrPeerRefused: a peer presented no certificate, or one that the peer
	// CA did not sign for both server and client use.
	ErrPeerRefused = errors.New("security: peer certificate refused")
	// ErrInsecureExposure: a non-loopback address would be served without
	// TLS and --insecure was not given.
	ErrInsecureExposure = errors.New("security: refusing to serve a non-loopback address without TLS")
	// ErrInsecureFile: a policy, tokens, private key or revocation list
	// file is writable by group or others, or owned by another user than
	// the node's and root (a *CredentialFileError names it and its mode).
	ErrInsecureFile = errors.New("security: credential file writable by another user")
	// ErrBadCRL: a revocation list does not parse, or no trusted CA signed
	// it (--client-crl-file, --peer-crl-file).
	ErrBadCRL = errors.New("security: invalid certificate revocation list")
	// ErrRevoked: the other side of a TLS handshake presented a certificate
	// that the revocation list names; the handshake is refused.
	ErrRevoked = errors.New("security: certificate revoked")
	// ErrNotMember: a connection's client certificate is not the node
	// certificate of a current member (or there is none), where only a
	// member may act: asserting a forwarded principal, a peer-only call.
	ErrNotMember = errors.New("security: not the node certificate of a current member")
	// ErrExists: a certificate or key file to be created already exists.
	ErrExists = errors.New("security: file exists")
	// ErrBadPolicy: a policy file (--auth-policy-file) does not parse:
	// unknown field or permission, empty principal, admin with a prefix.
	ErrBadPolicy = errors.New("security: invalid policy file")
	// ErrBadTokens: a tokens file (--auth-tokens-file) does not parse:
	// unknown field, empty principal, a digest that is not hex SHA-256.
	ErrBadTokens = errors.New("security: invalid tokens file")
	// ErrUnauthenticated: authorization is on and the request carries no
	// verified client certificate and no known bearer token (connect code
	// Unauthenticated).
	ErrUnauthenticated = errors.New("security: unauthenticated")
	// ErrPermissionDenied: the principal's policy does not allow the
	// request, or the lock belongs to another principal (connect code
	// PermissionDenied). Nothing changed.
	ErrPermissionDenied = errors.New("security: permission denied")
	// ErrForwardedPrincipal: a request asserted a principal in
	// PrincipalHeader over a connection that is not a current member
	// node's, or with a node certificate the peer revocation list names (a
	// client trying to impersonate, a revoked node key); refused as
	// Unauthenticated, with the reason (ErrNotMember, ErrRevoked) wrapped.
	ErrForwardedPrincipal = errors.New("security: principal header from a non-member connection")
)
