//go:build unix

package etcd_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends"
	"github.com/ticketd/ticketd/backends/backendtest"
)

// TestDataDirStaysBounded runs backendtest.RunDiskBound on every log store:
// under sustained renewals the data dir stays within a small multiple of
// the snapshot plus the retained log.
func TestDataDirStaysBounded(t *testing.T) {
	forEachStore(t, func(t *testing.T, open backendtest.Factory, _ backends.RestoreFunc) {
		backendtest.RunDiskBound(t, open)
	})
}
