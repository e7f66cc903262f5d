//go:build linux && faults

package hosts_test

import (
	"flag"
	"strings"
	"testing"

	"github.com/ticketd/ticketd/faults/hosts"
)

var backendFlag = flag.String("backend", "all", "backend to test: hashicorp, etcd, or all")

// backends lists the backends a scenario covers.
func backends() []string {
	if *backendFlag == "all" {
		return []string{"hashicorp", "etcd"}
	}
	return strings.Split(*backendFlag, ",")
}

// forBackends runs fn as one subtest per backend, skipping where network
// namespaces are unavailable.
func forBackends(t *testing.T, fn func(t *testing.T, backend string)) {
	hosts.Skip(t)
	for _, b := range backends() {
		t.Run(b, func(t *testing.T) { fn(t, b) })
	}
}
