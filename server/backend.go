package server

import (
	"fmt"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/backends/hashicorp"
	"github.com/ticketd/ticketd/server/config"
)

// backendFactory returns the constructor of the named consensus backend:
// config.BackendHashicorp (github.com/hashicorp/raft) or config.BackendEtcd
// (go.etcd.io/raft/v3). This is the one place that chooses a backend.
func backendFactory(name string) BackendFactory {
	return func(cfg backends.Config) (Backend, error) {
		switch name {
		case config.BackendHashicorp:
			return hashicorp.New(cfg)
		case config.BackendEtcd:
			return etcd.New(cfg)
		}
		return nil, fmt.Errorf("%w: unknown backend %q", config.ErrInvalid, name)
	}
}
