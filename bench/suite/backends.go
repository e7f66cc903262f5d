package suite

import (
	"slices"

	"github.com/ticketd/ticketd/backends"
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

// backendStores maps each backend name to the Raft log stores it offers
// (backends.Config.LogStore), the default first: the commit workload runs
// on each (Config.LogStores).
var backendStores = map[string][]string{
	report.SystemHashicorp: {backends.LogStoreWAL, backends.LogStoreBadger},
	report.SystemEtcd:      {backends.LogStoreWAL, backends.LogStoreBadger},
}

// commitTarget is one backend with one of its log stores.
type commitTarget struct{ backend, store string }

// system is the target's system name in the report (report.StoreSystem).
func (t commitTarget) system() string {
	return report.StoreSystem(t.backend, t.store, backends.DefaultLogStore)
}

// commitTargets returns every backend of c.Backends with each log store of
// c.LogStores (the default store when empty) it offers, in c.Backends order.
func (c Config) commitTargets() []commitTarget {
	stores := c.LogStores
	if len(stores) == 0 {
		stores = []string{backends.DefaultLogStore}
	}
	var out []commitTarget
	for _, b := range c.Backends {
		for _, s := range backendStores[b] {
			if slices.Contains(stores, s) {
				out = append(out, commitTarget{b, s})
			}
		}
	}
	return out
}

// LogStores returns the names of the Raft log stores a Config may list
// (backends.LogStores), the default first.
func LogStores() []string { return backends.LogStores() }
