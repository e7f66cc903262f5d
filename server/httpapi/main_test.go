package httpapi_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain checks that no test leaves goroutines behind: the nodes the
// tests start, their HTTP servers, workers and certificate reloaders all
// stop on Close.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
