package main

import (
	"errors"
	"fmt"

	"github.com/ticketd/ticketd/sdk"
)

// connHints name, in ticketctl's flags, the fix for each connection failure
// that the SDK knows is caused by the client's settings and fails at once
// (sdk/connfail.go): one sentence, then the transport's own error.
var connHints = []struct {
	cause error
	hint  string
}{
	{sdk.ErrServerSpeaksTLS, "the server speaks TLS: pass --cacert FILE (the cluster's CA, e.g. data/certs/ca.crt) or TICKETD_CACERT"},
	{sdk.ErrServerCertificate, "the server's certificate is not trusted: pass --cacert FILE with the CA that signed it"},
	{sdk.ErrClientCertificate, "the server requires a client certificate it accepts: pass --cert FILE and --key FILE (TICKETD_CLIENT_CERT, TICKETD_CLIENT_KEY)"},
	{sdk.ErrConnectionRefused, "no endpoint accepts connections: check --endpoints (or TICKETD_ENDPOINTS) and that the cluster runs"},
}

// hintError is an error whose message leads with the fix (connHints); it
// unwraps to the SDK's error, so the exit code is unchanged (1).
type hintError struct {
	hint string
	err  error
}

// Error implements error.
func (e *hintError) Error() string { return fmt.Sprintf("%s (%v)", e.hint, e.err) }

// Unwrap returns the SDK's error.
func (e *hintError) Unwrap() error { return e.err }

// connHint returns the fix connHints name for cause, or "" for another
// error or nil.
func connHint(cause error) string {
	for _, h := range connHints {
		if cause != nil && errors.Is(cause, h.cause) {
			return h.hint
		}
	}
	return ""
}

// explainConn puts the fix first in a connection failure caused by
// ticketctl's settings; other errors pass unchanged.
func explainConn(err error) error {
	if hint := connHint(err); hint != "" {
		return &hintError{hint: hint, err: err}
	}
	return err
}
