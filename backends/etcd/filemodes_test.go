//go:build unix

package etcd_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
)

func TestFileModes(t *testing.T) {
	forEachStore(t, func(t *testing.T, open backendtest.Factory, _ backends.RestoreFunc) {
		backendtest.RunFileModes(t, open, false)
	})
}
