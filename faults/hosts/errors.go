package hosts

import "errors"

// Sentinel errors of package hosts.
var (
	// ErrUnsupported: the machine cannot run host tests (not Linux, not
	// root, or no `ip` command); the wrapping error says which.
	ErrUnsupported = errors.New("hosts: network namespaces unavailable")
	// ErrNoLeader: no leader was agreed on before the deadline.
	ErrNoLeader = errors.New("hosts: no leader")
	// ErrAddresses: the /24 has no free host address left.
	ErrAddresses = errors.New("hosts: no free address")
)
