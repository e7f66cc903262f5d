//go:build faults && linux

package harness_test

import (
	"testing"
	"time"

	"github.com/ticketd/ticketd/faults/harness"
	"github.com/ticketd/ticketd/faults/hosts"
)

func init() {
	startHosts = func(t *testing.T) func(t *testing.T, backend string, nodes int, et time.Duration) harness.Cluster {
		hosts.Skip(t)
		return func(t *testing.T, backend string, nodes int, et time.Duration) harness.Cluster {
			return hosts.Start(t, hosts.Config{Backend: backend, Nodes: nodes, ElectionTimeout: et})
		}
	}
}
