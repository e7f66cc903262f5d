package suite

import (
	"slices"

	"github.com/ticketd/ticketd/backends/etcd"
	"github.com/ticketd/ticketd/backends/hashicorp"

	"github.com/ticketd/ticketd/bench/backendcluster"
	"github.com/ticketd/ticketd/bench/report"
)

// newBackend maps each backend name to its constructor.
var newBackend = map[string]backendcluster.NewFunc{
	report.SystemHashicorp: backendcluster.NewFuncOf(hashicorp.New),
	report.SystemEtcd:      backendcluster.NewFuncOf(etcd.New),
}

// Backends returns the names of the backends a Config may list, in report
// order (hashicorp, etcd).
func Backends() []string {
	var names []string
	for n := range newBackend {
		names = append(names, n)
	}
	slices.SortFunc(names, report.CompareSystems)
	return names
}
