package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/ticketd/ticketd/server/security"
)

// checkTokenTransport decides whether the bearer token may be sent to eps:
// over TLS always; over plaintext (an http:// endpoint, or a bare
// host:port without --cacert/--cert/--key) only to a loopback address, and
// then with a warning on stderr, since a token is a password that anyone on
// the path could read and replay. A plaintext non-loopback endpoint is a
// usage error naming it; nothing is sent. Host names other than
// "localhost" are not resolved: they count as non-loopback.
func checkTokenTransport(eps []string, tlsOn bool, stderr io.Writer) error {
	warned := false
	for _, e := range eps {
		plain := strings.HasPrefix(e, "http://") || (!strings.Contains(e, "://") && !tlsOn)
		if !plain {
			continue
		}
		if !security.IsLoopback(hostPort(e)) {
			return usagef("refusing to send the bearer token (--token, TICKETD_TOKEN) over plaintext to %s: "+
				"use https (--cacert) or unset the token", e)
		}
		if !warned {
			fmt.Fprintf(stderr, "ticketctl: warning: sending the bearer token over plaintext to %s (loopback only)\n", e)
			warned = true
		}
	}
	return nil
}

// hostPort is the host:port of endpoint (host:port, or a URL).
func hostPort(endpoint string) string {
	if _, rest, ok := strings.Cut(endpoint, "://"); ok {
		endpoint, _, _ = strings.Cut(rest, "/")
	}
	return endpoint
}
