// The defaults and timing rules this client shares with the Go SDK (its
// Default* constants, sdk/options.go; renewal timing, sdk/keeper.go).
// Both are checked against one file, sdk/testdata/client-spec.json, by
// test/spec.test.mjs here and sdk/spec_internal_test.go there: change
// them together. Internal: not exported from the package's entry points.

export const defaults = {
  /** Bounds one attempt of a call that does not wait in a queue; renewals use the smaller of it and ttl/3. */
  requestTimeoutMs: 5000,
  /** First retry delay; it doubles per retry up to backoffMaxMs. */
  backoffBaseMs: 25,
  /**
   * Cap of the retry delay: 100 ms, so the first retry after a leader
   * election (a few hundred milliseconds) is not parked behind a long
   * backoff (docs/benchmarks.md measured a 1 s cap adding 0.3–0.5 s to a
   * failover); etcd's client retries every 25 ms.
   */
  backoffMaxMs: 100,
  /** Fraction of a lease kept back as a safety margin for clock-rate drift (1%: twenty times what NTP may slew a clock). */
  driftRate: 0.01,
  /** Least safety margin, whatever the lease: timer and scheduling latency on a busy machine. */
  minMarginMs: 50,
  /** HTTP/2 PING after this much silence, and drop the connection when the PING goes unanswered as long (nodeTransport). */
  keepAliveMs: 2000,
  /** A lease is renewed every ttl/3 from the send time of its last acknowledged grant or renewal (etcd clientv3's KeepAlive period). */
  renewPeriodDivisor: 3,
  /** One attempt of a renewal is bounded by ttl/3 (or requestTimeoutMs, when smaller): several tries fit before the lease runs out. */
  renewAttemptTimeoutDivisor: 3,
  /** The retries of a renewal back off at most ttl/8 (or backoffMaxMs, when smaller). */
  renewBackoffCapDivisor: 8,
  /** Retries made at once (no backoff) per call because an error named a new leader: a leader change or two, never a loop. */
  leaderHintQuickRetries: 3,
  /** Page size listLocks and listSessions ask for. */
  listPageSize: 500,
  /** Longest owner-id prefix kept (ClientOptions.ownerPrefix). */
  ownerPrefixMaxLength: 64,
} as const;
