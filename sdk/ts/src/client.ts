// Client: leader-aware routing, retries with backoff, and the lock API. It
// mirrors the Go SDK (sdk/client.go, sdk/lock.go): writes and linearizable
// reads go to the leader, learnt from Status and from the LeaderHint detail
// of a follower's Unavailable error; every attempt of one acquire carries
// the same owner id, so a retry after an ambiguous failure gets the grant
// the earlier attempt produced.
import { createClient as createConnectClient } from "@connectrpc/connect";
import type { CallOptions, Client as ConnectClient } from "@connectrpc/connect";
import { ClusterService } from "./gen/ticket/v1/cluster_pb.js";
import type { Member, StatusResponse } from "./gen/ticket/v1/cluster_pb.js";
import { LockService, Mode } from "./gen/ticket/v1/lock_pb.js";
import type { Holder as HolderMsg, SessionInfo as SessionInfoMsg } from "./gen/ticket/v1/lock_pb.js";
import type { TransportFactory } from "./transport.js";
import { backoffMs, sleep, systemClock } from "./clock.js";
import type { Clock } from "./clock.js";
import { defaults } from "./defaults.js";
import {
  AmbiguousError,
  ClosedError,
  Failure,
  LeaseLostError,
  NotHeldError,
  TicketdError,
  UnavailableError,
  classify,
  leaderHint,
  opKey,
  wrapErr,
} from "./errors.js";
import { renewAt } from "./keeper.js";
import { Lease } from "./lease.js";
import { Session } from "./session.js";
import { watch } from "./watch.js";
import type { Watch, WatchOptions } from "./watch.js";

/** Options of createClient. Durations are in milliseconds. */
export interface ClientOptions {
  /**
   * API endpoints: "host:port" (http) or base URLs ("http://…", "https://…",
   * all of one scheme). One reachable endpoint is enough; the client learns
   * the leader from it.
   */
  endpoints: string[];
  /** Makes one transport per node: nodeTransport() (Node) or webTransport() (browsers). */
  transport: TransportFactory;
  /** Bounds one attempt of a call that does not wait in a queue (default 5000). */
  requestTimeoutMs?: number;
  /** Bounds a whole call, retries included, unless it waits in a key's queue or has its own signal (default 30000). */
  callTimeoutMs?: number;
  /** First retry delay; doubles per retry up to backoffMaxMs (default 25). */
  backoffBaseMs?: number;
  /** Cap of the retry delay (default 100). */
  backoffMaxMs?: number;
  /** Fraction of a lease kept back as a safety margin for clock-rate drift (default 0.01). */
  driftRate?: number;
  /** Least safety margin, whatever the lease (default 50). */
  minMarginMs?: number;
  /**
   * Send writes and linearizable reads to the leader, learnt from Status and
   * leader hints (default true). false sends every call to the configured
   * endpoints, which forward it to the leader (one hop): for a page that may
   * only call its own origin, like the web console.
   */
  followLeader?: boolean;
  /** Prefix of the owner ids the client makes (default "ts"). */
  ownerPrefix?: string;
  /**
   * Bearer token sent as `Authorization: Bearer …` with every call, for a
   * cluster with --auth-tokens-file; a function is asked on every call.
   */
  bearerToken?: string | (() => string | undefined);
}

/** Options of lock and tryLock. */
export interface LockOptions {
  /** Lease length in milliseconds (within the server's --lease-min-ms and --lease-max-ms). */
  ttlMs: number;
  /** Wait in the key's FIFO queue until granted (lock: default true; tryLock: always false). */
  wait?: boolean;
  /** Owner id (≤ 128 bytes); by default a fresh one per call. Reuse one to get back the grant of an ambiguous earlier call. */
  owner?: string;
  /** Gives up waiting or retrying when aborted. */
  signal?: AbortSignal;
  /**
   * How the key is held (docs/semantics.md#modes-and-limits): Mode.EXCLUSIVE (default) or
   * Mode.SHARED, a readers-writer lock's read side: shared holders coexist,
   * an exclusive request waits until none hold the key, and waiters are
   * served first in, first out across modes (a waiting exclusive request
   * holds back every later shared one: writers never starve).
   */
  mode?: Mode;
  /** Shorthand for mode: Mode.SHARED when true (mode wins when both are given). */
  shared?: boolean;
  /**
   * Makes key a counting semaphore of limit slots (Curator
   * InterProcessSemaphoreV2): up to limit holders at once, each with its
   * own token. 0 (default) means a lock. Every acquirer must give the same
   * limit while the key has holders or waiters, else LimitMismatchError
   * (with the key's limit). A semaphore is never shared.
   */
  limit?: number;
  /**
   * Acquire under this session (createSession, or a session id; etcd
   * lease, Consul session): the lock's lease is the session's TTL (ttlMs is
   * then ignored and may be 0), KeepAlive of the session renews it, and the
   * lock is released when the session ends. The Lease of such a lock does
   * not renew itself (the server refuses a Renew of it); under a Session its
   * signal follows the session's, under a bare id it has no local deadline
   * (whoever keeps the session alive knows when it may have ended). An
   * unknown, ended or another principal's session throws
   * SessionNotFoundError.
   */
  session?: Session | bigint;
}

/** Options of calls that take only a signal. */
export interface CallOpts {
  /** Ends the call (and its retries) when aborted. */
  signal?: AbortSignal;
}

/** Options of getLock and listLocks. */
export interface ReadOpts extends CallOpts {
  /** Let any node answer from its local state (not linearizable). */
  stale?: boolean;
}

/** Grant is one lock granted by the server, as acquire returns it. */
export interface Grant {
  /** The lock key. */
  key: string;
  /** The fencing token (Chubby §2.4 sequencer): strictly greater than every token granted before it. */
  token: bigint;
  /** The lease length the server granted, in milliseconds. */
  ttlMs: number;
  /** The owner id the request carried. */
  owner: string;
  /** Monotonic send time (performance.now) of the earliest attempt that may have produced the grant. */
  sentAt: number;
  /** The session the lock is held under (0n: none, its own lease). */
  session: bigint;
  /** How it was requested: Mode.EXCLUSIVE or Mode.SHARED. */
  mode: Mode;
  /** The semaphore's slot count it was requested with (0: a lock). */
  limit: number;
}

/** HolderInfo is one holder of a key: an exclusive lock has one, a shared key or a semaphore may have several. */
export interface HolderInfo {
  /** The holder's fencing token. */
  token: bigint;
  /** The owner id of the holder's acquire. */
  owner: string;
  /** The holder's lease length in milliseconds (its session's TTL when session is set). */
  ttlMs: number;
  /** Milliseconds left on the answering node's clock; -1 when it does not know (a follower's stale read). */
  remainingMs: number;
  /** The session the holder is under (0n: none). */
  session: bigint;
}

/**
 * LockInfo describes the holders of a key, as getLock and listLocks report
 * it. token, ttlMs, remainingMs and owner describe the holder of an
 * exclusive lock (mode EXCLUSIVE, limit 0); for a shared key or a
 * semaphore they are zero and holders lists every holder.
 */
export interface LockInfo {
  /** The lock key. */
  key: string;
  /** False when nobody holds the key (the other fields are then zero). */
  held: boolean;
  /** The exclusive holder's fencing token (0n for a shared key or a semaphore). */
  token: bigint;
  /** The exclusive holder's lease length in milliseconds. */
  ttlMs: number;
  /** Milliseconds before the leader would expire the lock if not renewed; -1 when the answering node does not know (a follower's stale read). */
  remainingMs: number;
  /** The owner id of the exclusive holder's acquire. */
  owner: string;
  /** Every holder of the key, in token order (one for an exclusive lock; none when free). */
  holders: HolderInfo[];
  /** How the key is held: Mode.EXCLUSIVE (a lock or a semaphore) or Mode.SHARED. */
  mode: Mode;
  /** The semaphore's slot count; 0 for a lock. */
  limit: number;
}

/** TokenCheck is checkToken's answer. */
export interface TokenCheck {
  /** True when the token is one of the key's current holders and its lease has not run out. */
  valid: boolean;
  /** The newest (highest) token holding the key; 0n when it is free. For an exclusive lock, its holder's. */
  currentToken: bigint;
  /** The key's mode while it is held. */
  mode: Mode;
  /** The key's semaphore limit while it is held (0: a lock). */
  limit: number;
}

/** SessionLockInfo is one lock held under a session. */
export interface SessionLockInfo {
  /** The lock key. */
  key: string;
  /** The holder's fencing token. */
  token: bigint;
  /** The owner id of the holder's acquire. */
  owner: string;
  /** How the key is held. */
  mode: Mode;
  /** The key's semaphore slot count; 0 for a lock. */
  limit: number;
}

/** SessionInfo describes an open session, as getSession and listSessions report it. */
export interface SessionInfo {
  /** The session's id. */
  id: bigint;
  /** The session's lease in milliseconds, restarted by every KeepAlive. */
  ttlMs: number;
  /** Milliseconds left on the answering node's clock; -1 when it does not know. */
  remainingMs: number;
  /** The principal that opened it ("" with authorization off). */
  principal: string;
  /** The locks held under it, in key and token order. */
  locks: SessionLockInfo[];
}

/** Options of listSessions. */
export interface ListSessionsOpts extends CallOpts {
  /** Only the sessions this principal opened. */
  principal?: string;
  /** Only the sessions holding a lock whose key starts with this prefix. */
  keyPrefix?: string;
}

/** One node's connect clients. */
interface NodeClients {
  url: string;
  lock: ConnectClient<typeof LockService>;
  cluster: ConnectClient<typeof ClusterService>;
}

/** How a logical call is made (Go: callSpec). @internal */
export interface CallSpec {
  op: string;
  key: string;
  owner?: string;
  toLeader: boolean;
  /** Per-attempt timeout in ms; 0: only the call's signal bounds an attempt. */
  timeoutMs: number;
  /** Cap of the retry backoff in ms; 0: the client's. */
  backoffMs?: number;
  /** An unresolved failure is ambiguous. */
  mutates?: boolean;
  /** No overall callTimeoutMs (a waiting acquire). */
  unbounded?: boolean;
}

/** How a successful call went (Go: outcome). */
interface Outcome {
  sentAt: number;
  firstMaybe: number;
  maybeEarlier: boolean;
}

/**
 * createClient returns a client for the cluster at opts.endpoints. It does
 * no I/O. Throws InvalidArgumentError-like TicketdError when endpoints is
 * empty or mixes schemes.
 */
export function createClient(opts: ClientOptions): Client {
  return new Client(opts);
}

/**
 * Client talks to a ticketd cluster: it routes writes and linearizable
 * reads to the leader, fails over between nodes, and retries retryable
 * failures with backoff and jitter until the call's signal aborts. One
 * client per process or page; close() it when done. All methods may be
 * called concurrently.
 */
export class Client {
  /** @internal */ readonly opts: Required<Omit<ClientOptions, "bearerToken">> & Pick<ClientOptions, "bearerToken">;
  /** @internal Where the client and its leases read the time and set timers. */
  readonly clock: Clock;
  private readonly scheme: string;
  private readonly endpoints: string[];
  private readonly configured = new Set<string>();
  private readonly known = new Set<string>();
  private readonly nodes = new Map<string, NodeClients>();
  private leaderUrl = "";
  private next = 0;
  private ownerSeq = 0;
  private readonly ownerBase: string;
  private readonly closing = new AbortController();
  private readonly bg = new Set<Promise<unknown>>();

  /** Use createClient; clock is internal (tests give a fake one). */
  constructor(opts: ClientOptions, /** @internal */ clock: Clock = systemClock) {
    this.clock = clock;
    this.opts = {
      requestTimeoutMs: defaults.requestTimeoutMs,
      callTimeoutMs: 30_000,
      backoffBaseMs: defaults.backoffBaseMs,
      backoffMaxMs: defaults.backoffMaxMs,
      driftRate: defaults.driftRate,
      minMarginMs: defaults.minMarginMs,
      ownerPrefix: "ts",
      followLeader: true,
      ...opts,
    };
    if (opts.endpoints.length === 0) throw new TicketdError("ticketd: createClient: no endpoints");
    const first = opts.endpoints[0]!.trim();
    this.scheme = first.includes("://") ? first.slice(0, first.indexOf("://")) : "http";
    this.endpoints = opts.endpoints.map((e) => {
      const u = baseUrlOf(e, this.scheme);
      if (!u.startsWith(this.scheme + "://")) {
        throw new TicketdError(`ticketd: createClient: endpoint ${JSON.stringify(e)}: every endpoint must use ${this.scheme}`);
      }
      this.configured.add(hostOf(u));
      return u;
    });
    const rnd = new Uint8Array(8);
    globalThis.crypto.getRandomValues(rnd);
    this.ownerBase = `${this.opts.ownerPrefix.slice(0, defaults.ownerPrefixMaxLength)}/${[...rnd].map((b) => b.toString(16).padStart(2, "0")).join("")}`;
  }

  /** The base URLs the client was created with. */
  get endpointUrls(): string[] {
    return [...this.endpoints];
  }

  /** The base URL of the node the client believes to be the leader, or "". */
  get leader(): string {
    return this.leaderUrl;
  }

  /**
   * close stops every lease's renewals (their signals abort with a
   * LeaseLostError caused by ClosedError), cancels background releases,
   * waits for them, and closes the transports' connections. Leases are not
   * released: the server ends them when their lease runs out. Idempotent.
   */
  async close(): Promise<void> {
    this.closing.abort(new ClosedError("ticketd: client closed"));
    await Promise.allSettled([...this.bg]);
    this.opts.transport.close?.();
  }

  /** The client's own abort signal, aborted by close(). @internal */
  get closedSignal(): AbortSignal {
    return this.closing.signal;
  }

  /** Runs fn in the background; close() waits for it. @internal */
  background(fn: (signal: AbortSignal) => Promise<unknown>): void {
    if (this.closing.signal.aborted) return;
    const p = fn(this.closing.signal).catch(() => undefined);
    this.bg.add(p);
    void p.finally(() => this.bg.delete(p));
  }

  /** marginMs is the safety margin kept back from a lease of ttlMs. @internal */
  marginMs(ttlMs: number): number {
    return Math.max(ttlMs * this.opts.driftRate, this.opts.minMarginMs);
  }

  /**
   * localDeadline is the local deadline of a lease of ttlMs acknowledged
   * for a request sent at sentAt: sentAt + ttl − margin (see Keeper). @internal
   */
  localDeadline(sentAt: number, ttlMs: number): number {
    return sentAt + ttlMs - this.marginMs(ttlMs);
  }

  private newOwner(): string {
    return `${this.ownerBase}-${++this.ownerSeq}`;
  }

  /**
   * lock takes key for a lease of opts.ttlMs, waiting in the key's FIFO
   * queue on the leader unless opts.wait is false, and returns the Lease,
   * which renews itself every ttl/3 until release().
   *
   * With opts.mode, opts.shared or opts.limit it takes a shared lock or a
   * semaphore slot; with opts.session the lock is held under that session
   * (see LockOptions).
   *
   * Throws LockedError (wait false, held by another owner),
   * LimitMismatchError, SessionNotFoundError,
   * InvalidArgumentError, ResourceExhaustedError, PermissionDeniedError,
   * AmbiguousError (the signal aborted while the request may have been
   * granted; a grant to a client-made owner is released in the
   * background), or UnavailableError / the abort reason.
   */
  async lock(key: string, opts: LockOptions): Promise<Lease> {
    const made = opts.owner === undefined || opts.owner === "";
    const owner = made ? this.newOwner() : opts.owner!;
    const wait = opts.wait ?? true;
    for (;;) {
      const g = await this.acquireWith(key, opts, wait, owner, made);
      // A lock under a session is renewed by the session's KeepAlive.
      if (g.session !== 0n) return new Lease(this, g, opts.session instanceof Session ? opts.session : undefined);
      if (this.clock.now() <= renewAt(g.sentAt, g.ttlMs)) return new Lease(this, g);
      // The grant came long after the request was sent (a wait in the
      // queue, or retries): measure the lease afresh with a renewal.
      try {
        const r = await this.renewWith(g.key, g.token, g.ttlMs, opts.signal);
        return new Lease(this, { ...g, ttlMs: r.ttlMs, sentAt: r.sentAt });
      } catch (err) {
        if (err instanceof NotHeldError) continue; // lapsed before use: ask again
        if (this.clock.now() < this.localDeadline(g.sentAt, g.ttlMs)) return new Lease(this, g);
        this.background(async (signal) => {
          await this.release(key, g.token, { signal: AbortSignal.any([signal, this.clock.timeoutSignal(g.ttlMs)]) });
        });
        throw new LeaseLostError(`ticketd: lock ${JSON.stringify(key)}: token ${g.token} was granted but its lease ran out before it could be confirmed`, { cause: err });
      }
    }
  }

  /**
   * rlock is lock with mode Mode.SHARED: the read side of a readers-writer
   * lock (Chubby shared locks, Curator InterProcessReadWriteLock). Shared
   * holders coexist, each with its own fencing token; it waits while an
   * exclusive holder, or an exclusive request queued before it, is there.
   */
  rlock(key: string, opts: LockOptions): Promise<Lease> {
    return this.lock(key, { ...opts, mode: Mode.SHARED });
  }

  /** tryRLock is rlock without waiting: throws LockedError at once when the key is held exclusively. */
  tryRLock(key: string, opts: Omit<LockOptions, "wait">): Promise<Lease> {
    return this.lock(key, { ...opts, mode: Mode.SHARED, wait: false });
  }

  /** tryLock is lock without waiting: a key held by another owner throws LockedError at once. */
  tryLock(key: string, opts: Omit<LockOptions, "wait">): Promise<Lease> {
    return this.lock(key, { ...opts, wait: false });
  }

  /**
   * acquire asks for key once (with retries) and returns the grant without
   * a Lease: nothing renews it. Most callers want lock or tryLock. Throws
   * as lock does.
   */
  acquire(key: string, opts: LockOptions): Promise<Grant> {
    const made = opts.owner === undefined || opts.owner === "";
    return this.acquireWith(key, opts, opts.wait ?? false, made ? this.newOwner() : opts.owner!, made);
  }

  private async acquireWith(key: string, opts: LockOptions, wait: boolean, owner: string, made: boolean): Promise<Grant> {
    const { ttlMs, signal } = opts;
    const mode = opts.mode ?? (opts.shared ? Mode.SHARED : Mode.EXCLUSIVE);
    const limit = opts.limit ?? 0;
    const session = opts.session instanceof Session ? opts.session.id : (opts.session ?? 0n);
    const req = { key, leaseMs: BigInt(Math.round(ttlMs)), wait, owner, mode, limit, session };
    const spec: CallSpec = {
      op: "acquire", key, owner, toLeader: true, mutates: true, unbounded: wait,
      timeoutMs: wait ? 0 : this.opts.requestTimeoutMs,
    };
    try {
      const { res, out } = await this.invoke(spec, signal, (n, o) => n.lock.acquire(req, o));
      const granted = Number(res.leaseMs);
      return {
        key, token: res.token, ttlMs: granted > 0 ? granted : ttlMs, owner, sentAt: out.firstMaybe,
        session: res.session !== 0n ? res.session : session, mode, limit,
      };
    } catch (err) {
      if (made && err instanceof AmbiguousError) this.releaseOwned(key, owner, ttlMs);
      throw err;
    }
  }

  /** releaseOwned releases in the background the lock on key if owner holds it (after an ambiguous acquire). */
  private releaseOwned(key: string, owner: string, ttlMs: number): void {
    this.background(async (signal) => {
      const s = AbortSignal.any([signal, this.clock.timeoutSignal(ttlMs)]);
      const info = await this.getLock(key, { signal: s });
      const h = info.holders.find((x) => x.owner === owner);
      if (h !== undefined) await this.release(key, h.token, { signal: s });
    });
  }

  /**
   * renew extends the lease of the lock on key held with token and returns
   * the lease the leader granted, in milliseconds. A Lease does this by
   * itself. Throws NotHeldError when the lock is no longer held with token.
   */
  async renew(key: string, token: bigint, opts: CallOpts = {}): Promise<number> {
    return (await this.renewWith(key, token, 0, opts.signal)).ttlMs;
  }

  /**
   * boundRenewal bounds the attempts and the retry backoff of spec, a
   * renewal (renew, keepAlive) of a lease of ttlMs (0: unknown, left as it
   * is): attempts by ttl/3, the backoff by ttl/8 (Go: callSpec.boundRenewal),
   * and the whole call by the lease's deadline signal rather than
   * callTimeoutMs. @internal
   */
  boundRenewal(spec: CallSpec, ttlMs: number): void {
    if (ttlMs <= 0) return;
    spec.timeoutMs = Math.min(spec.timeoutMs, Math.max(ttlMs / defaults.renewAttemptTimeoutDivisor, 1));
    spec.backoffMs = Math.max(ttlMs / defaults.renewBackoffCapDivisor, 1);
    spec.unbounded = true;
  }

  /**
   * renewWith sends Renew with retries; for a lease of ttlMs (0: unknown)
   * attempts and backoff are bounded by boundRenewal (Go: renew). @internal
   */
  async renewWith(key: string, token: bigint, ttlMs: number, signal?: AbortSignal): Promise<{ ttlMs: number; sentAt: number }> {
    const spec: CallSpec = { op: "renew", key, toLeader: true, timeoutMs: this.opts.requestTimeoutMs };
    this.boundRenewal(spec, ttlMs);
    const { res, out } = await this.invoke(spec, signal, (n, o) => n.lock.renew({ key, token }, o));
    return { ttlMs: Number(res.leaseMs), sentAt: out.sentAt };
  }

  /**
   * release ends the lock on key held with token; a lock granted since with
   * another token is never touched. When an earlier attempt may have
   * released it and a later one finds it gone, release succeeds. Throws
   * NotHeldError, InvalidArgumentError, PermissionDeniedError,
   * AmbiguousError.
   */
  async release(key: string, token: bigint, opts: CallOpts = {}): Promise<void> {
    const spec: CallSpec = { op: "release", key, toLeader: true, mutates: true, timeoutMs: this.opts.requestTimeoutMs };
    const st = { maybe: false };
    try {
      await this.invoke(spec, opts.signal, (n, o) => n.lock.release({ key, token }, o), st);
    } catch (err) {
      if (err instanceof NotHeldError && st.maybe) return;
      throw err;
    }
  }

  /**
   * forceRelease ends whatever lock key holds, whoever holds it
   * (`ReleaseRequest.force`): an admin's recovery tool, audited on the
   * server with the caller. With authorization on it needs the admin
   * permission (send an admin's bearerToken); without it anyone may. Unlike
   * release it may end a lock granted a moment ago, so use release with the
   * token when you know it. When an earlier attempt may have released the
   * lock and a later one finds the key free, it succeeds. Throws NotHeldError
   * (nothing held), PermissionDeniedError, UnauthenticatedError,
   * InvalidArgumentError, AmbiguousError.
   */
  async forceRelease(key: string, opts: CallOpts = {}): Promise<void> {
    const spec: CallSpec = { op: "release", key, toLeader: true, mutates: true, timeoutMs: this.opts.requestTimeoutMs };
    const st = { maybe: false };
    try {
      await this.invoke(spec, opts.signal, (n, o) => n.lock.release({ key, token: 0n, force: true }, o), st);
    } catch (err) {
      if (err instanceof NotHeldError && st.maybe) return;
      throw err;
    }
  }

  /** getLock reports who holds key (every holder, with the key's mode and limit): linearizable unless opts.stale. */
  async getLock(key: string, opts: ReadOpts = {}): Promise<LockInfo> {
    const stale = opts.stale ?? false;
    const spec: CallSpec = { op: "get", key, toLeader: !stale, timeoutMs: this.opts.requestTimeoutMs };
    const { res } = await this.invoke(spec, opts.signal, (n, o) => n.lock.getLock({ key, stale }, o));
    if (!res.held) return { key, held: false, token: 0n, ttlMs: 0, remainingMs: 0, owner: "", holders: [], mode: Mode.EXCLUSIVE, limit: 0 };
    return lockInfoOf(key, res);
  }

  /**
   * listLocks returns every held key whose key starts with prefix, in key
   * order, one entry per key with all its holders, fetching as many pages as needed (linearizable per page unless
   * opts.stale), and the read index of the last page: a watch from
   * readIndex + 1 misses no change after it.
   */
  async listLocks(prefix: string, opts: ReadOpts = {}): Promise<LockInfo[] & { readIndex: bigint }> {
    const stale = opts.stale ?? false;
    const locks: LockInfo[] = [];
    let pageToken = "";
    let readIndex = 0n;
    for (;;) {
      const spec: CallSpec = { op: "list", key: prefix, toLeader: !stale, timeoutMs: this.opts.requestTimeoutMs };
      const { res } = await this.invoke(spec, opts.signal, (n, o) =>
        n.lock.listLocks({ prefix, pageSize: defaults.listPageSize, pageToken, stale }, o),
      );
      for (const l of res.locks) locks.push(lockInfoOf(l.key, l));
      readIndex = res.readIndex;
      pageToken = res.nextPageToken;
      if (pageToken === "") return Object.assign(locks, { readIndex });
    }
  }

  /**
   * checkToken tells whether token is still one of the current holders of
   * key (CheckToken, Chubby's CheckSequencer; linearizable), the newest
   * holder's token (0n when the key is free), and the key's mode and limit.
   */
  async checkToken(key: string, token: bigint, opts: CallOpts = {}): Promise<TokenCheck> {
    const spec: CallSpec = { op: "check", key, toLeader: true, timeoutMs: this.opts.requestTimeoutMs };
    const { res } = await this.invoke(spec, opts.signal, (n, o) => n.lock.checkToken({ key, token }, o));
    return { valid: res.valid, currentToken: res.currentToken, mode: res.mode, limit: res.limit };
  }

  /**
   * createSession opens a session of ttlMs milliseconds (within the
   * server's lease bounds; etcd lease, Consul session) bound to the
   * caller's principal, and returns it, keeping itself alive every ttl/3
   * until Session.close() (which releases every lock under it in one
   * entry), a refused KeepAlive, its local deadline, or close(). Acquire
   * locks under it with LockOptions.session. Not idempotent: a retry after
   * an ambiguous failure may leave an unused session behind, whose lease
   * runs out. Throws InvalidArgumentError, ResourceExhaustedError (the
   * server's session limit), PermissionDeniedError, AmbiguousError.
   */
  async createSession(ttlMs: number, opts: CallOpts = {}): Promise<Session> {
    const spec: CallSpec = { op: "create session", key: "", toLeader: true, mutates: true, timeoutMs: this.opts.requestTimeoutMs };
    const { res, out } = await this.invoke(spec, opts.signal, (n, o) => n.lock.createSession({ ttlMs: BigInt(Math.round(ttlMs)) }, o));
    const got = Number(res.ttlMs);
    return new Session(this, res.session, got > 0 ? got : ttlMs, out.firstMaybe);
  }

  /**
   * keepAlive restarts the lease of session id, and with it the lease of
   * every lock held under it, in one replicated command (etcd
   * LeaseKeepAlive), and returns the session's TTL in milliseconds. A
   * Session does this by itself; call it for a session kept alive by hand.
   * Throws SessionNotFoundError (unknown or ended: its locks are gone; also
   * another principal's session, which servers answer as an unknown one).
   */
  async keepAlive(id: bigint, opts: CallOpts = {}): Promise<number> {
    return (await this.keepAliveWith(id, 0, opts.signal)).ttlMs;
  }

  /**
   * keepAliveWith sends KeepAlive with retries; for a session of ttlMs (0:
   * unknown) attempts are bounded as renewWith bounds them. @internal
   */
  async keepAliveWith(id: bigint, ttlMs: number, signal?: AbortSignal): Promise<{ ttlMs: number; sentAt: number }> {
    const spec: CallSpec = { op: "keepalive", key: String(id), toLeader: true, timeoutMs: this.opts.requestTimeoutMs };
    this.boundRenewal(spec, ttlMs);
    const { res, out } = await this.invoke(spec, signal, (n, o) => n.lock.keepAlive({ session: id }, o));
    return { ttlMs: Number(res.ttlMs), sentAt: out.sentAt };
  }

  /**
   * closeSession ends session id and releases every lock held under it in
   * one committed entry (etcd LeaseRevoke, Consul session destroy);
   * Session.close() does this for a Session. When an
   * earlier attempt may have closed it and a later one finds it gone, it
   * succeeds. Throws SessionNotFoundError (also for another principal's
   * session, unless an admin closes it), AmbiguousError.
   */
  async closeSession(id: bigint, opts: CallOpts = {}): Promise<void> {
    const spec: CallSpec = { op: "close session", key: String(id), toLeader: true, mutates: true, timeoutMs: this.opts.requestTimeoutMs };
    const st = { maybe: false };
    try {
      await this.invoke(spec, opts.signal, (n, o) => n.lock.closeSession({ session: id }, o), st);
    } catch (err) {
      if (err instanceof NotHeldError && st.maybe) return;
      throw err;
    }
  }

  /**
   * getSession describes session id: its TTL, remaining lease, principal
   * and locks (linearizable). A principal sees its own sessions, an admin
   * every session. Throws SessionNotFoundError (unknown, ended, or another
   * principal's), InvalidArgumentError (id 0n).
   */
  async getSession(id: bigint, opts: CallOpts = {}): Promise<SessionInfo> {
    const spec: CallSpec = { op: "get session", key: String(id), toLeader: true, timeoutMs: this.opts.requestTimeoutMs };
    const { res } = await this.invoke(spec, opts.signal, (n, o) => n.lock.getSession({ session: id }, o));
    return sessionInfoOf(res.session);
  }

  /**
   * listSessions returns every open session the caller may see (a
   * principal its own, an admin all) that opts select, in ascending id
   * order, fetching as many pages as needed (linearizable per page).
   */
  async listSessions(opts: ListSessionsOpts = {}): Promise<SessionInfo[]> {
    const out: SessionInfo[] = [];
    const principal = opts.principal ?? "";
    const keyPrefix = opts.keyPrefix ?? "";
    let pageToken = "";
    for (;;) {
      const spec: CallSpec = { op: "list sessions", key: keyPrefix, toLeader: true, timeoutMs: this.opts.requestTimeoutMs };
      const { res } = await this.invoke(spec, opts.signal, (n, o) =>
        n.lock.listSessions({ principal, keyPrefix, pageSize: defaults.listPageSize, pageToken }, o),
      );
      for (const s of res.sessions) out.push(sessionInfoOf(s));
      pageToken = res.nextPageToken;
      if (pageToken === "") return out;
    }
  }

  /** status returns the leader's view of the cluster and refreshes the client's idea of the leader. */
  async status(opts: CallOpts = {}): Promise<StatusResponse> {
    const spec: CallSpec = { op: "status", key: "", toLeader: true, timeoutMs: this.opts.requestTimeoutMs };
    return (await this.invoke(spec, opts.signal, (n, o) => n.cluster.status({}, o))).res;
  }

  /**
   * nodeStatus returns what the node at endpoint reports about itself, in
   * one attempt, without following the leader. Throws UnavailableError when
   * it cannot be reached.
   */
  async nodeStatus(endpoint: string, opts: CallOpts = {}): Promise<StatusResponse> {
    const n = this.nodeFor(baseUrlOf(endpoint, this.scheme));
    const signal = AbortSignal.any([this.closing.signal, this.clock.timeoutSignal(this.opts.requestTimeoutMs), ...(opts.signal ? [opts.signal] : [])]);
    try {
      return await n.cluster.status({}, { signal, headers: this.headers() });
    } catch (err) {
      throw wrapErr("status", n.url, err);
    }
  }

  /**
   * watch streams the changes to locks under prefix as an async iterator
   * (see LockEvent), on any node, resuming on another node from the last
   * index seen + 1 after a retryable failure. Ends when opts.signal aborts
   * or the client closes. Throws WatchOutOfRangeError when the start index
   * is older than the node's retained history. `await w.started` gives the
   * index the watch starts after, once the stream (opened by the first
   * next()) is in place and before any change: wait for it before making
   * changes the watch must see.
   */
  watch(prefix: string, opts: WatchOptions = {}): Watch {
    return watch(this, prefix, opts);
  }

  /** headers returns the per-call headers (authorization). @internal */
  headers(): Record<string, string> {
    const b = this.opts.bearerToken;
    const tok = typeof b === "function" ? b() : b;
    return tok ? { authorization: `Bearer ${tok}` } : {};
  }

  /** nodeFor returns the connect clients for a base URL, creating them once. @internal */
  nodeFor(url: string): NodeClients {
    let n = this.nodes.get(url);
    if (n === undefined) {
      const t = this.opts.transport(url);
      n = { url, lock: createConnectClient(LockService, t), cluster: createConnectClient(ClusterService, t) };
      this.nodes.set(url, n);
    }
    return n;
  }

  /** route picks the node for the next attempt. @internal */
  route(toLeader: boolean): { n: NodeClients; isLeader: boolean } {
    if (toLeader && this.opts.followLeader && this.leaderUrl !== "") return { n: this.nodeFor(this.leaderUrl), isLeader: true };
    return { n: this.nodeFor(this.endpoints[this.next % this.endpoints.length]!), isLeader: false };
  }

  /** setLeader records a leader address from Status or a hint if a configured endpoint vouches for it. */
  private setLeader(addr: string): boolean {
    const host = hostOf(addr.trim());
    if (!host.includes(":")) return false;
    if (!this.configured.has(host) && !this.known.has(host)) return false;
    const u = `${this.scheme}://${host}`;
    if (this.leaderUrl === u) return false;
    this.leaderUrl = u;
    return true;
  }

  /** nodeFailed forgets n as leader and moves the rotation past it. @internal */
  nodeFailed(n: NodeClients): void {
    if (this.leaderUrl === n.url) this.leaderUrl = "";
    if (this.endpoints[this.next % this.endpoints.length] === n.url) this.next++;
  }

  private async discover(n: NodeClients, signal: AbortSignal, timeoutMs: number): Promise<NodeClients> {
    const s = AbortSignal.any([signal, this.clock.timeoutSignal(timeoutMs > 0 ? timeoutMs : this.opts.requestTimeoutMs)]);
    const st = await n.cluster.status({}, { signal: s, headers: this.headers() });
    this.learnMembers(n, st.members);
    if (st.leaderAddr === "" || (!this.setLeader(st.leaderAddr) && this.leaderUrl === "")) return n;
    return this.route(true).n;
  }

  private learnMembers(n: NodeClients, members: Member[]): void {
    if (!this.configured.has(hostOf(n.url))) return;
    for (const m of members) if (m.apiAddr !== "") this.known.add(hostOf(m.apiAddr));
  }

  /** noteHint follows a LeaderHint in err; returns whether a new leader was named. @internal */
  noteHint(err: unknown, n: NodeClients): boolean {
    const hint = leaderHint(err);
    if (hint === "") {
      this.nodeFailed(n);
      return false;
    }
    return this.setLeader(hint);
  }

  /** retryCap returns the cap of a call's retry backoff: capMs when it is positive and below the client's cap, else the client's cap. @internal */
  retryCap(capMs: number | undefined): number {
    return capMs !== undefined && capMs > 0 && capMs < this.opts.backoffMaxMs ? capMs : this.opts.backoffMaxMs;
  }

  /** retryDelay returns the n-th backoff delay, capped at retryCap(capMs). @internal */
  retryDelay(capMs: number | undefined, attempt: number): number {
    const maxD = this.retryCap(capMs);
    return backoffMs(Math.min(this.opts.backoffBaseMs, maxD), maxD, attempt);
  }

  /**
   * invoke runs fn against the cluster until it succeeds, fails
   * definitively, or the call's signal (or the client) ends (Go: invoke).
   */
  private async invoke<R>(
    spec: CallSpec,
    userSignal: AbortSignal | undefined,
    fn: (n: NodeClients, o: CallOptions) => Promise<R>,
    st: { maybe: boolean } = { maybe: false },
  ): Promise<{ res: R; out: Outcome }> {
    const signals = [this.closing.signal];
    if (userSignal) signals.push(userSignal);
    if (!spec.unbounded && !userSignal) signals.push(this.clock.timeoutSignal(this.opts.callTimeoutMs));
    const signal = AbortSignal.any(signals);
    let last: unknown;
    let firstMaybe = 0;
    let quick = 0;
    const giveUp = (): never => {
      const reason: unknown = signal.reason;
      let err: TicketdError;
      if (reason instanceof ClosedError) err = reason;
      else if (last !== undefined) {
        const w = wrapErr(spec.op, spec.key, last);
        err = new (w.constructor as typeof TicketdError)(`ticketd: ${opKey(spec.op, spec.key)}: gave up (${messageOf(reason)}); last failure: ${w.message}`, { cause: last, code: w.code });
      } else err = new UnavailableError(`ticketd: ${opKey(spec.op, spec.key)}: ${messageOf(reason)}`, { cause: reason });
      if (spec.mutates && st.maybe) throw new AmbiguousError(spec.op, spec.key, spec.owner ?? "", err);
      throw err;
    };
    for (let attempt = 0; ; attempt++) {
      if (signal.aborted) giveUp();
      let { n, isLeader } = this.route(spec.toLeader);
      if (spec.toLeader && this.opts.followLeader && !isLeader) {
        try {
          n = await this.discover(n, signal, spec.timeoutMs);
        } catch (err) {
          last = err; // nothing was sent for the call itself: not ambiguous
          // A refusal (Unauthenticated, PermissionDenied: a missing or
          // wrong bearer token) would be the same on every node: fail now
          // rather than retry until the call's timeout.
          if (!signal.aborted && classify(err) === Failure.Final) throw wrapErr(spec.op, spec.key, err);
          this.nodeFailed(n);
          if (!(await sleep(this.clock, this.retryDelay(spec.backoffMs, attempt - quick), signal))) giveUp();
          continue;
        }
      }
      const attemptSignal = spec.timeoutMs > 0 ? AbortSignal.any([signal, this.clock.timeoutSignal(spec.timeoutMs)]) : signal;
      const sentAt = this.clock.now();
      try {
        const res = await fn(n, { signal: attemptSignal, headers: this.headers() });
        return { res, out: { sentAt, firstMaybe: firstMaybe || sentAt, maybeEarlier: st.maybe } };
      } catch (err) {
        last = err;
        let kind = classify(err);
        if (signal.aborted && kind !== Failure.NotSent) kind = Failure.Retry;
        if (kind === Failure.Final) throw wrapErr(spec.op, spec.key, err);
        if (kind === Failure.Retry && !st.maybe) {
          st.maybe = true;
          firstMaybe = sentAt;
        }
        if (this.noteHint(err, n) && quick < defaults.leaderHintQuickRetries) {
          quick++;
          continue; // a new leader named: try it at once
        }
        if (!(await sleep(this.clock, this.retryDelay(spec.backoffMs, attempt - quick), signal))) giveUp();
      }
    }
  }
}

/** The fields GetLockResponse and Lock share. */
interface LockMsg {
  token: bigint;
  leaseMs: bigint;
  remainingMs: bigint;
  owner: string;
  holders: HolderMsg[];
  mode: Mode;
  limit: number;
}

/** lockInfoOf converts a held key's GetLockResponse or Lock. */
function lockInfoOf(key: string, m: LockMsg): LockInfo {
  return {
    key, held: true, token: m.token, ttlMs: Number(m.leaseMs), remainingMs: Number(m.remainingMs), owner: m.owner,
    holders: m.holders.map((h) => ({
      token: h.token, owner: h.owner, ttlMs: Number(h.leaseMs), remainingMs: Number(h.remainingMs), session: h.session,
    })),
    mode: m.mode, limit: m.limit,
  };
}

/** sessionInfoOf converts the API's SessionInfo (absent: an empty one). */
function sessionInfoOf(s: SessionInfoMsg | undefined): SessionInfo {
  return {
    id: s?.session ?? 0n, ttlMs: Number(s?.ttlMs ?? 0n), remainingMs: Number(s?.remainingMs ?? -1n), principal: s?.principal ?? "",
    locks: (s?.locks ?? []).map((l) => ({ key: l.key, token: l.token, owner: l.owner, mode: l.mode, limit: l.limit })),
  };
}

/** baseUrlOf normalises "host:port" (with scheme) or a URL into a base URL without a trailing slash. */
export function baseUrlOf(addr: string, scheme: string): string {
  addr = addr.trim();
  if (addr === "") throw new TicketdError("ticketd: empty endpoint");
  if (!addr.includes("://")) addr = `${scheme}://${addr}`;
  return addr.replace(/\/+$/, "");
}

/** hostOf returns the lower-cased host:port of a base URL or address. */
export function hostOf(u: string): string {
  const i = u.indexOf("://");
  let h = i >= 0 ? u.slice(i + 3) : u;
  const j = h.indexOf("/");
  if (j >= 0) h = h.slice(0, j);
  return h.toLowerCase();
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}
