// Lease: a held lock that renews itself and tells, through an AbortSignal,
// when it may have ended. It mirrors the Go SDK's Lease (sdk/lease.go).
import type { Client, Grant } from "./client.js";
import { now, sleep, timeoutSignal } from "./clock.js";
import { LeaseLostError, NotHeldError, ReleasedError, TicketdError } from "./errors.js";

/**
 * Lease is a held lock: its key, its fencing token, and a signal that aborts
 * when the lease may have ended. It renews itself every ttl/3, measured
 * from the send time of the last acknowledged grant or renewal (etcd
 * clientv3's KeepAlive period), retrying through leader changes, until
 * release(), a refused renewal, the local deadline, or Client.close().
 *
 * The local deadline is sent + ttl − margin, where sent is the monotonic
 * send time of the last acknowledged grant or renewal and margin =
 * max(ttl·driftRate, minMarginMs). The server measures the same lease from
 * when it handles the request, which is later, and never ends it earlier
 * than ttl after that; so `signal` aborts before the server can grant the
 * key to anyone else, as long as the clocks' rates differ by less than the
 * margin. This is Chubby's local lease timeout (Burrows, OSDI 2006, §2.8).
 * The signal is aborted by a timer at the deadline, not by polling.
 */
export class Lease {
  /** The lock key. */
  readonly key: string;
  /** The fencing token (Chubby §2.4 sequencer): pass it with every write to the guarded resource. */
  readonly token: bigint;
  /** The owner id the grant was requested with. */
  readonly owner: string;
  /**
   * Aborts when the lease may have ended. Its reason is a ReleasedError
   * after release(), else a LeaseLostError (cause NotHeldError when the
   * server refused a renewal, ClosedError when the client was closed).
   */
  readonly signal: AbortSignal;

  private readonly c: Client;
  private readonly ctl = new AbortController();
  private readonly stopRenew = new AbortController();
  private readonly renewer: Promise<void>;
  private ttl: number;
  private sentAt: number;
  private deadlineAt: number;
  private timer: ReturnType<typeof setTimeout> | undefined;
  private released = false;
  private releasing: Promise<void> | undefined;

  /** @internal Made by Client.lock and Client.tryLock. */
  constructor(c: Client, g: Grant) {
    this.c = c;
    this.key = g.key;
    this.token = g.token;
    this.owner = g.owner;
    this.signal = this.ctl.signal;
    this.ttl = g.ttlMs;
    this.sentAt = g.sentAt;
    this.deadlineAt = g.sentAt + g.ttlMs - c.marginMs(g.ttlMs);
    this.armTimer();
    const onClose = () => this.finish(new LeaseLostError("ticketd: lease lost: client closed", { cause: c.closedSignal.reason }));
    if (c.closedSignal.aborted) onClose();
    else c.closedSignal.addEventListener("abort", onClose, { once: true });
    this.signal.addEventListener("abort", () => c.closedSignal.removeEventListener("abort", onClose), { once: true });
    this.renewer = this.renewLoop();
  }

  /** The lease the server last granted or renewed, in milliseconds. */
  get ttlMs(): number {
    return this.ttl;
  }

  /**
   * The local deadline as a monotonic time (performance.now()): the signal
   * aborts then unless a renewal is acknowledged first.
   */
  get deadline(): number {
    return this.deadlineAt;
  }

  /** Milliseconds left before the local deadline (0 once passed or ended). */
  remainingMs(): number {
    return this.signal.aborted ? 0 : Math.max(0, this.deadlineAt - now());
  }

  /**
   * release stops the renewals and releases the lock with the lease's
   * token, so a lock granted to someone else since is never released. The
   * signal aborts (reason ReleasedError) when it returns. A second call
   * after success resolves at once. Throws NotHeldError (the lease had
   * ended), AmbiguousError, or the call's error; the renewals are stopped
   * anyway, so the server ends the lock when its lease runs out.
   */
  async release(opts: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.released) return;
    while (this.releasing) await this.releasing.catch(() => undefined);
    if (this.released) return;
    this.releasing = (async () => {
      this.stopRenew.abort();
      await this.renewer;
      try {
        await this.c.release(this.key, this.token, opts);
        this.released = true;
        this.finish(new ReleasedError(`ticketd: lease released: key ${JSON.stringify(this.key)} token ${this.token}`));
      } catch (err) {
        const msg = err instanceof NotHeldError ? "lease lost" : "lease lost: renewals stopped by release, release failed";
        this.finish(new LeaseLostError(`ticketd: ${msg}: ${(err as Error).message}`, { cause: err }));
        throw err;
      }
    })();
    try {
      await this.releasing;
    } finally {
      this.releasing = undefined;
    }
  }

  /** finish aborts the signal with reason unless it is aborted already, and stops the timer and renewer. */
  private finish(reason: TicketdError): void {
    if (this.signal.aborted) return;
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.ctl.abort(reason);
    this.stopRenew.abort();
  }

  private armTimer(): void {
    if (this.timer !== undefined) clearTimeout(this.timer);
    this.timer = setTimeout(() => this.onTimer(), Math.max(0, this.deadlineAt - now()));
  }

  /** onTimer runs at the local deadline: it ends the lease unless a renewal moved the deadline. */
  private onTimer(): void {
    if (this.signal.aborted) return;
    if (this.deadlineAt - now() > 0) return this.armTimer();
    this.finish(
      new LeaseLostError(`ticketd: lease lost: key ${JSON.stringify(this.key)} token ${this.token}: no renewal acknowledged before the local deadline`),
    );
  }

  /** extend records an acknowledged renewal sent at sentAt that granted ttlMs. */
  private extend(sentAt: number, ttlMs: number): void {
    if (this.signal.aborted || ttlMs <= 0) return;
    this.ttl = ttlMs;
    this.sentAt = sentAt;
    const d = sentAt + ttlMs - this.c.marginMs(ttlMs);
    if (d > this.deadlineAt) {
      this.deadlineAt = d;
      this.armTimer();
    }
  }

  /** renewLoop renews every ttl/3 until the lease ends or release() stops it. */
  private async renewLoop(): Promise<void> {
    const stop = this.stopRenew.signal;
    for (;;) {
      if (!(await sleep(this.sentAt + this.ttl / 3 - now(), stop))) return;
      // Renewals are bounded by the local deadline: past it the lease is lost anyway.
      const bound = AbortSignal.any([stop, timeoutSignal(Math.max(1, this.deadlineAt - now()))]);
      try {
        const r = await this.c.renewWith(this.key, this.token, this.ttl, bound);
        this.extend(r.sentAt, r.ttlMs);
      } catch (err) {
        if (stop.aborted) return; // release() takes over, or the lease already ended
        const why = err instanceof NotHeldError ? "renewal refused" : "renewal failed";
        this.finish(new LeaseLostError(`ticketd: lease lost: key ${JSON.stringify(this.key)} token ${this.token}: ${why}: ${(err as Error).message}`, { cause: err }));
        return;
      }
    }
  }
}
