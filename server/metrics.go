package server

import (
	"context"
	"errors"
	"time"

	"connectrpc.com/connect"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	ticketv1 "github.com/ticketd/ticketd/sdk/gen/ticket/v1"
	"github.com/ticketd/ticketd/sdk/gen/ticket/v1/ticketv1connect"
	"github.com/ticketd/ticketd/server/forward"
	"github.com/ticketd/ticketd/server/security"
)

// procedures are every RPC the node serves, for metric label children
// resolved once at start (never per request).
var procedures = []string{
	ticketv1connect.LockServiceAcquireProcedure,
	ticketv1connect.LockServiceReleaseProcedure,
	ticketv1connect.LockServiceRenewProcedure,
	ticketv1connect.LockServiceGetLockProcedure,
	ticketv1connect.LockServiceListLocksProcedure,
	ticketv1connect.LockServiceCheckTokenProcedure,
	ticketv1connect.LockServiceCreateSessionProcedure,
	ticketv1connect.LockServiceKeepAliveProcedure,
	ticketv1connect.LockServiceCloseSessionProcedure,
	ticketv1connect.LockServiceGetSessionProcedure,
	ticketv1connect.LockServiceListSessionsProcedure,
	ticketv1connect.ClusterServiceStatusProcedure,
	ticketv1connect.ClusterServiceAddMemberProcedure,
	ticketv1connect.ClusterServiceRemoveMemberProcedure,
	ticketv1connect.ClusterServiceTransferLeaderProcedure,
}

// codeOK labels successful calls; failures use connect.Code.String().
const codeOK = "ok"

// maxCode is the largest connect code (Unauthenticated, 16).
const maxCode = connect.CodeUnauthenticated

// rpcMetrics are the resolved children of one procedure.
type rpcMetrics struct {
	codes    [maxCode + 1]prometheus.Counter // index 0 is "ok"
	duration prometheus.Observer
}

// metrics is a node's Prometheus instrumentation.
type metrics struct {
	rpc     map[string]*rpcMetrics
	expired prometheus.Counter
	ghosts  prometheus.Counter
	// expiryLateness times each expiry this leader made, from the moment
	// the lease could first be expired here to its Expire's local apply
	// (Node.expired).
	expiryLateness prometheus.Observer
	// handoffsPipelined counts turns handed to a head waiter as the
	// holder's Release was proposed (releasehandoff.go); handoffGrantsRejected
	// counts the Grants of such turns that applied while the key was still
	// held (rejected; the waiter was requeued at the head of its queue).
	handoffsPipelined     prometheus.Counter
	handoffGrantsRejected prometheus.Counter
	// watchEvents counts events sent on Watch streams.
	watchEvents prometheus.Counter
	// acquireWait times Acquire requests with wait set (any outcome);
	// renewRefused counts Renew requests refused (NotFound: the lease had
	// ended, was released, or the token is not the holder's).
	acquireWait  prometheus.Observer
	renewRefused prometheus.Counter
	// cluster holds the Raft-level metrics (metrics_cluster.go).
	cluster *clusterMetrics
	// forwarded counts requests forwarded between nodes, by procedure, code
	// and role: "follower" (this node forwarded a client's request to the
	// leader) or "leader" (this node served a request forwarded to it).
	forwarded *prometheus.CounterVec
	// quotaRefusals counts requests refused at a per-principal quota, by
	// kind, and by principal too with metrics_principal_labels (quota.go).
	quotaRefusals   *prometheus.CounterVec
	principalLabels bool
}

// quotaRefused counts one request of principal refused at its quota of kind.
func (m *metrics) quotaRefused(kind security.QuotaKind, principal string) {
	if m.principalLabels {
		m.quotaRefusals.WithLabelValues(string(kind), principal).Inc()
		return
	}
	m.quotaRefusals.WithLabelValues(string(kind)).Inc()
}

// newMetrics registers the node's metrics on reg: per-RPC counts by code and
// latency, expiries, ghost releases, and gauges read from the node on scrape.
func newMetrics(reg *prometheus.Registry, n *Node) (*metrics, error) {
	requests := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ticketd", Name: "rpc_requests_total",
		Help: "Client RPCs received by this node, by procedure and connect code (ok for success); a request forwarded to this leader by a follower is counted in rpc_forwarded_total{role=\"leader\"} instead, so cluster sums count each request once.",
	}, []string{"procedure", "code"})
	durations := prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: "ticketd", Name: "rpc_duration_seconds",
		Help:    "RPC latency in seconds as seen by this node, by procedure.",
		Buckets: []float64{.0002, .0005, .001, .002, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	}, []string{"procedure"})
	m := &metrics{
		rpc: map[string]*rpcMetrics{},
		expired: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "leases_expired_total",
			Help: "Leases ended by an Expire this node proposed as leader: a lock's own lease or a session's (whose locks end with it).",
		}),
		ghosts: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "ghost_releases_total",
			Help: "Grants released at once because their client was gone when they applied.",
		}),
		watchEvents: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "watch_events_sent_total",
			Help: "Events sent on Watch streams by this node.",
		}),
		handoffsPipelined: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "handoffs_pipelined_total",
			Help: "Turns this leader handed to a key's head waiter as the holder's Release was proposed, so that the waiter's Grant commits with the Release (one commit per handoff).",
		}),
		handoffGrantsRejected: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "handoff_grants_rejected_total",
			Help: "Grants of pipelined handoffs rejected because the key was still held when they applied (the Release did not free it first); the waiter keeps its place at the head of the queue.",
		}),
	}
	m.forwarded = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ticketd", Name: "rpc_forwarded_total",
		Help: "Requests forwarded between nodes, by procedure, connect code and role (follower: forwarded to the leader; leader: served for a follower). rpc_requests_total counts each client request once, on the node the client called.",
	}, []string{"procedure", "code", "role"})
	for _, p := range procedures {
		r := &rpcMetrics{duration: durations.WithLabelValues(p)}
		r.codes[0] = requests.WithLabelValues(p, codeOK)
		for c := connect.CodeCanceled; c <= maxCode; c++ {
			r.codes[c] = requests.WithLabelValues(p, c.String())
		}
		m.rpc[p] = r
		for _, role := range []string{"follower", "leader"} {
			m.forwarded.WithLabelValues(p, codeOK, role) // present from the start, for dashboards
		}
	}
	gauge := func(name, help string, fn func() float64) prometheus.Collector {
		return prometheus.NewGaugeFunc(prometheus.GaugeOpts{Namespace: "ticketd", Name: name, Help: help}, fn)
	}
	acquireWait := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "ticketd", Name: "acquire_wait_duration_seconds",
		Help:    "Time Acquire requests with wait=true spent on the node the client called, in seconds, whatever the outcome.",
		Buckets: prometheus.ExponentialBuckets(.001, 4, 10),
	})
	m.acquireWait = acquireWait
	expiryLateness := prometheus.NewHistogram(prometheus.HistogramOpts{
		Namespace: "ticketd", Name: "lease_expiry_lateness_seconds",
		Help:    "Leader: for each lease (a lock's own or a session's) an Expire of this node removed, the time from the moment it could first be expired here (its deadline by this node's measure, lowered to the voters' reports, or this node's taking office if later) to the local apply of that Expire. One expiry round (a quorum confirmation and a commit) is normal; more means a starved process, a slow disk or a quorum slow to answer (docs/design.md#leases).",
		Buckets: []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30},
	})
	m.expiryLateness = expiryLateness
	m.renewRefused = prometheus.NewCounter(prometheus.CounterOpts{
		Namespace: "ticketd", Name: "renewals_refused_total",
		Help: "Renew requests refused with not_found (lease ended or released, or not the holder's token), counted on the node the client called.",
	})
	quotaLabels := []string{"kind"}
	m.principalLabels = n.cfg.MetricsPrincipalLabels
	if m.principalLabels {
		quotaLabels = append(quotaLabels, "principal")
	}
	m.quotaRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: "ticketd", Name: "quota_refusals_total",
		Help: "Requests refused with resource_exhausted because their principal was at its quota (policy quotas or default_quota), by kind: locks, sessions (counted on the leader), watchers, waiters; by principal too with --metrics-principal-labels.",
	}, quotaLabels)
	if !m.principalLabels {
		for _, k := range security.QuotaKinds {
			m.quotaRefusals.WithLabelValues(string(k)) // present from the start, for dashboards
		}
	}
	var clusterCs []prometheus.Collector
	m.cluster, clusterCs = newClusterMetrics(n)
	cs := []prometheus.Collector{
		requests, durations, m.expired, expiryLateness, m.ghosts, m.watchEvents, m.forwarded, acquireWait, m.renewRefused,
		m.quotaRefusals, newQuotaCollector(n, m.principalLabels),
		m.handoffsPipelined, m.handoffGrantsRejected,
		gauge("watchers", "Watch streams open on this node.", func() float64 { return float64(n.hub.Watchers()) }),
		gauge("keepalive_streams", "KeepAliveStream streams open on this node.", func() float64 { return float64(n.kaStreams.open()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "keepalive_stream_messages_total",
			Help: "Session keep-alives this node answered on KeepAliveStream streams (unary KeepAlives are in rpc_requests_total).",
		}, func() float64 { return float64(n.kaStreams.answered.Load()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "watchers_dropped_slow_total",
			Help: "Watch streams ended with ResourceExhausted because their buffer filled.",
		}, func() float64 { return float64(n.hub.Dropped()) }),
		gauge("locks_held", "Locks in this node's lock table.", func() float64 { return float64(n.sm.Len()) }),
		gauge("sessions", "Open sessions in this node's lock table.", func() float64 { return float64(n.sm.SessionLen()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "session_keepalives_merged_total",
			Help: "KeepAlives this leader answered with a KeepAliveSession entry that a concurrent KeepAlive of the same session had already asked for (no entry of their own).",
		}, func() float64 { return float64(n.lead.keepAlives.Merged()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "renewals_batched_total",
			Help: "Renewals (session KeepAlives and lock Renews) this leader wrote in a RenewBatch entry shared with others.",
		}, func() float64 { return float64(n.lead.renewals.Batched()) }),
		gauge("renewals_waiting", "Renewals waiting on this leader for a renewal entry in flight to be answered, to share the next one.",
			func() float64 { return float64(n.lead.renewals.Waiting()) }),
		gauge("cluster_command_version", "On the leader: the highest replicated command version every member of the configuration is known to apply, the minimum of what each member's Status says (0 while a member's is unknown, and on followers). RenewBatch entries are written only from 4 on.",
			func() float64 { return float64(n.versions.Version()) }),
		gauge("last_token", "Last fencing token applied on this node.", func() float64 { return float64(n.sm.LastToken()) }),
		gauge("applied_index", "Last Raft log index applied on this node.", func() float64 { return float64(n.sm.AppliedIndex()) }),
		gauge("waiters", "Acquire requests waiting in this leader's queues.", func() float64 { return float64(n.queue.Waiting()) }),
		gauge("leases", "Leases whose deadlines this node tracks (every node tracks every held lock).", func() float64 { return float64(n.lessor.Len()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "lease_reconciles_total",
			Help: "Full passes of the lessor over the lock table: one per snapshot restored into it, never per election (docs/design.md#leases).",
		}, func() float64 { return float64(n.lessor.Reconciles()) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{
			Namespace: "ticketd", Name: "lease_loads_total",
			Help: "Of those passes, direct loads into a lessor that tracked nothing (a restart's snapshot, or a first snapshot from the leader): no comparison with earlier deadlines (docs/design.md#leases).",
		}, func() float64 { return float64(n.lessor.Loads()) }),
		gauge("is_leader", "1 when this node is the promoted leader.", func() float64 { return b2f(n.isPromoted()) }),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	for _, c := range append(cs, clusterCs...) {
		if err := reg.Register(c); err != nil {
			var are prometheus.AlreadyRegisteredError
			if errors.As(err, &are) {
				continue // a shared registry (WithRegistry) already has the runtime collectors
			}
			return nil, err
		}
	}
	return m, nil
}

// interceptor counts and times every unary RPC by procedure and code, once
// per client request: on the node the client called. A request a follower
// forwarded is counted there (and in rpc_forwarded_total{role="follower"});
// the leader that serves it counts it only in
// rpc_forwarded_total{role="leader"}, so cluster-wide sums of
// rpc_requests_total do not count it twice.
func (m *metrics) interceptor() connect.UnaryInterceptorFunc {
	return func(next connect.UnaryFunc) connect.UnaryFunc {
		return func(ctx context.Context, req connect.AnyRequest) (connect.AnyResponse, error) {
			start := time.Now()
			res, err := next(ctx, req)
			if r, ok := m.rpc[req.Spec().Procedure]; ok {
				code := connect.Code(0)
				if err != nil {
					code = connect.CodeOf(err)
				}
				codeName := codeOK
				if code != 0 {
					codeName = code.String()
				}
				if forward.Forwarded(ctx) {
					m.forwarded.WithLabelValues(req.Spec().Procedure, codeName, "leader").Inc()
					return res, err
				}
				if ci, ok := connect.CallInfoForHandlerContext(ctx); ok && ci.ResponseHeader().Get(forward.LeaderHeader) != "" {
					m.forwarded.WithLabelValues(req.Spec().Procedure, codeName, "follower").Inc()
				}
				if code <= maxCode {
					r.codes[code].Inc()
				}
				elapsed := time.Since(start).Seconds()
				r.duration.Observe(elapsed)
				switch p := req.Any().(type) {
				case *ticketv1.AcquireRequest:
					if p.GetWait() {
						m.acquireWait.Observe(elapsed)
					}
				case *ticketv1.RenewRequest:
					if code == connect.CodeNotFound {
						m.renewRefused.Inc()
					}
				}
			}
			return res, err
		}
	}
}

// isPromoted reports whether this node is the promoted leader (its barrier
// applied, serving writes), for metrics read on scrape.
func (n *Node) isPromoted() bool { return n.role.isPromoted() }
