package server

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/ticketd/ticketd/server/security"
)

// quotaCollector exports, on scrape, how principals stand against their
// quotas (quota.go, docs/security.md#quotas):
//
//   - ticketd_quota_principals_at_limit{kind}: principals whose count of
//     kind has reached their quota of it (a quota of 0 is never reached);
//   - with metrics_principal_labels only, ticketd_quota_used{kind,principal}:
//     each principal's count of kind, for principals that have any.
//
// Locks and sessions are read from this node's replicated table (the
// cluster's counts, grants and creates in flight left out); watchers from
// this node's watch hub; waiters from this node's wait queues (a leader's
// only: followers queue nothing). The cost is one pass over the principals
// that hold something, per scrape.
type quotaCollector struct {
	n               *Node
	principalLabels bool
	atLimit, used   *prometheus.Desc
}

func newQuotaCollector(n *Node, principalLabels bool) *quotaCollector {
	return &quotaCollector{
		n: n, principalLabels: principalLabels,
		atLimit: prometheus.NewDesc("ticketd_quota_principals_at_limit",
			"Principals at their quota of each kind (locks and sessions from the replicated table, watchers and waiters on this node).",
			[]string{"kind"}, nil),
		used: prometheus.NewDesc("ticketd_quota_used",
			"Each principal's count of each quota kind (locks and sessions from the replicated table, watchers and waiters on this node); only with --metrics-principal-labels.",
			[]string{"kind", "principal"}, nil),
	}
}

// Describe implements prometheus.Collector.
func (c *quotaCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.atLimit
	if c.principalLabels {
		ch <- c.used
	}
}

// Collect implements prometheus.Collector.
func (c *quotaCollector) Collect(ch chan<- prometheus.Metric) {
	locks, sessions := c.n.sm.PrincipalCounts()
	counts := map[security.QuotaKind]map[string]int{
		security.QuotaLocks: locks, security.QuotaSessions: sessions,
		security.QuotaWatchers: c.n.hub.PrincipalCounts(), security.QuotaWaiters: c.n.queue.PrincipalCounts(),
	}
	for _, kind := range security.QuotaKinds {
		at := 0
		for p, used := range counts[kind] {
			if p == "" { // authorization off: no quotas, no principal
				continue
			}
			if limit, _ := c.n.quotaOf(p, kind); limit > 0 && used >= limit {
				at++
			}
			if c.principalLabels {
				ch <- prometheus.MustNewConstMetric(c.used, prometheus.GaugeValue, float64(used), string(kind), p)
			}
		}
		ch <- prometheus.MustNewConstMetric(c.atLimit, prometheus.GaugeValue, float64(at), string(kind))
	}
}
