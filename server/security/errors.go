package security

import "errors"

// Sentinel errors of package security. Compare with errors.Is.
var (
	// ErrNoCertificate: a PEM file holds no certificate, or the key does not
	// match it.
	ErrNoCertificate = errors.New("security: no usable certificate")
	// ErrNoCA: a CA bundle holds no certificate.
	ErrNoCA = errors.New("security: no CA certificate")
	// ErrPeerRefused: a peer presented no certificate, or one that the peer
	// CA did not sign for both server and client use.
	ErrPeerRefused = errors.New("security: peer certificate refused")
	// ErrInsecureExposure: a non-loopback address would be served without
	// TLS and --insecure was not given.
	ErrInsecureExposure = errors.New("security: refusing to serve a non-loopback address without TLS")
	// ErrExists: a certificate or key file to be created already exists.
	ErrExists = errors.New("security: file exists")
)
