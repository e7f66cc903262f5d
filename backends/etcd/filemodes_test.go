//go:build unix

package etcd_test

import (
	"testing"

	"github.com/ticketd/ticketd/backends/backendtest"
)

func TestFileModes(t *testing.T) {
	backendtest.RunFileModes(t, newNode, false)
}
