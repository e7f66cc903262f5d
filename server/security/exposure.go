package security

import (
	"fmt"
	"net"
	"net/netip"
)

// Endpoint is one listening address and whether TLS protects it.
type Endpoint struct {
	// Name is the config key, for the error message ("api_addr", "raft_addr").
	Name string
	// Addr is host:port.
	Addr string
	// TLS reports whether the endpoint serves TLS.
	TLS bool
}

// CheckExposure refuses any endpoint whose host is not loopback and that has
// no TLS, unless insecure is set (CockroachDB's rule: a cluster reachable
// from the network never runs without TLS by accident). Loopback addresses
// (127.0.0.0/8, ::1, "localhost") are always allowed, so a local cluster
// needs no certificates. An empty host or an unspecified one (0.0.0.0, ::)
// listens on every interface and counts as exposed. Errors wrap
// ErrInsecureExposure and name the endpoint and the flags that fix it.
func CheckExposure(insecure bool, endpoints ...Endpoint) error {
	if insecure {
		return nil
	}
	for _, e := range endpoints {
		if e.TLS || IsLoopback(e.Addr) {
			continue
		}
		return fmt.Errorf("%w: %s %s is not loopback; set its TLS flags (--cert-file/--key-file for the API, --peer-cert-file/--peer-key-file/--peer-trusted-ca-file for peers) or pass --insecure",
			ErrInsecureExposure, e.Name, e.Addr)
	}
	return nil
}

// IsLoopback reports whether host:port names a loopback host.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip, err := netip.ParseAddr(host)
	return err == nil && ip.IsLoopback()
}
