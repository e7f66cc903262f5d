// Keeper: a lease kept alive in the background, with a local deadline and
// an AbortSignal that fires when the lease may have ended. Lease (one lock)
// and Session (many locks; etcd lease, Consul session) are both one; it
// mirrors the Go SDK's keeper (sdk/keeper.go).
import type { Client } from "./client.js";
import { sleep } from "./clock.js";
import { defaults } from "./defaults.js";
import { LeaseLostError, NotHeldError, TicketdError } from "./errors.js";

/**
 * RenewFn renews a kept lease once (with retries bounded by signal) and
 * returns the lease the server granted, in milliseconds, and the monotonic
 * send time of the acknowledged attempt.
 */
export type RenewFn = (ttlMs: number, signal: AbortSignal) => Promise<{ ttlMs: number; sentAt: number }>;

/**
 * renewAt is when a lease of ttlMs acknowledged for a request sent at
 * sentAt is next renewed: ttl/3 later (Go: renewAt). @internal
 */
export function renewAt(sentAt: number, ttlMs: number): number {
  return sentAt + ttlMs / defaults.renewPeriodDivisor;
}

/**
 * Keeper renews a lease every ttl/3, measured from the send time of the
 * last acknowledged grant or renewal (etcd clientv3's KeepAlive period),
 * retrying through leader changes, until stopped, a refused renewal, the
 * local deadline, or Client.close().
 *
 * The local deadline is sent + ttl − margin, where sent is the monotonic
 * send time of the last acknowledged grant or renewal and margin =
 * max(ttl·driftRate, minMarginMs). The server measures the same lease from
 * when it handles the request, which is later, and never ends it earlier
 * than ttl after that; so `signal` aborts before the server can end it, as
 * long as the clocks' rates differ by less than the margin. This is
 * Chubby's local lease timeout (Burrows, OSDI 2006, §2.8). The signal is
 * aborted by a timer at the deadline, not by polling. Safe for concurrent
 * use (JavaScript's one thread).
 */
export abstract class Keeper {
  /**
   * Aborts when the lease may have ended. Its reason is a ReleasedError
   * after a successful release or close, else a LeaseLostError (cause
   * NotHeldError when the server refused a renewal, ClosedError when the
   * client was closed).
   */
  readonly signal: AbortSignal;

  /** @internal */ protected readonly c: Client;
  private readonly ctl = new AbortController();
  private readonly stopRenew = new AbortController();
  private renewer: Promise<void> = Promise.resolve();
  private ttl: number;
  private sentAt: number;
  private deadlineAt: number;
  private cancelTimer: (() => void) | undefined;
  /** What the messages name: `key "k" token 5`, `session 12`. */
  private readonly name: string;

  /**
   * @internal Starts the deadline timer of a lease of ttlMs acknowledged
   * for a request sent at sentAt, and, when renew is given, the renewals.
   * Without renew there is no local deadline (Infinity): the signal aborts
   * on finish() or Client.close() only.
   */
  protected constructor(c: Client, name: string, ttlMs: number, sentAt: number, renew: RenewFn | undefined) {
    this.c = c;
    this.name = name;
    this.signal = this.ctl.signal;
    this.ttl = ttlMs;
    this.sentAt = sentAt;
    this.deadlineAt = renew ? c.localDeadline(sentAt, ttlMs) : Infinity;
    if (renew) this.armTimer();
    const onClose = () => this.finish(new LeaseLostError("ticketd: lease lost: client closed", { cause: c.closedSignal.reason }));
    if (c.closedSignal.aborted) onClose();
    else c.closedSignal.addEventListener("abort", onClose, { once: true });
    this.signal.addEventListener("abort", () => c.closedSignal.removeEventListener("abort", onClose), { once: true });
    if (renew && !this.signal.aborted) this.renewer = this.renewLoop(renew);
  }

  /** The lease the server last granted or renewed, in milliseconds. */
  get ttlMs(): number {
    return this.ttl;
  }

  /**
   * The local deadline as a monotonic time (performance.now()): the signal
   * aborts then unless a renewal is acknowledged first. Infinity when
   * nothing here renews the lease.
   */
  get deadline(): number {
    return this.deadlineAt;
  }

  /** Milliseconds left before the local deadline (0 once passed or ended; Infinity without one). */
  remainingMs(): number {
    return this.signal.aborted ? 0 : Math.max(0, this.deadlineAt - this.c.clock.now());
  }

  /** stopRenewals stops the renewals and waits until none is in flight. @internal */
  protected async stopRenewals(): Promise<void> {
    this.stopRenew.abort();
    await this.renewer;
  }

  /** finish aborts the signal with reason unless it is aborted already, and stops the timer and renewer. @internal */
  protected finish(reason: TicketdError): void {
    if (this.signal.aborted) return;
    this.cancelTimer?.();
    this.ctl.abort(reason);
    this.stopRenew.abort();
  }

  private armTimer(): void {
    this.cancelTimer?.();
    this.cancelTimer = this.c.clock.setTimer(() => this.onTimer(), this.deadlineAt - this.c.clock.now());
  }

  /** onTimer runs at the local deadline: it ends the lease unless a renewal moved the deadline. */
  private onTimer(): void {
    if (this.signal.aborted) return;
    if (this.deadlineAt - this.c.clock.now() > 0) return this.armTimer();
    this.finish(new LeaseLostError(`ticketd: lease lost: ${this.name}: no renewal acknowledged before the local deadline`));
  }

  /** extend records an acknowledged renewal sent at sentAt that granted ttlMs. */
  private extend(sentAt: number, ttlMs: number): void {
    if (this.signal.aborted || ttlMs <= 0) return;
    this.ttl = ttlMs;
    this.sentAt = sentAt;
    const d = this.c.localDeadline(sentAt, ttlMs);
    if (d > this.deadlineAt) {
      this.deadlineAt = d;
      this.armTimer();
    }
  }

  /** renewLoop renews every ttl/3 until the lease ends or stopRenewals stops it. */
  private async renewLoop(renew: RenewFn): Promise<void> {
    const stop = this.stopRenew.signal;
    for (;;) {
      const clock = this.c.clock;
      if (!(await sleep(clock, renewAt(this.sentAt, this.ttl) - clock.now(), stop))) return;
      // Renewals are bounded by the local deadline: past it the lease is lost anyway.
      const bound = AbortSignal.any([stop, clock.timeoutSignal(Math.max(1, this.deadlineAt - clock.now()))]);
      try {
        const r = await renew(this.ttl, bound);
        this.extend(r.sentAt, r.ttlMs);
      } catch (err) {
        if (stop.aborted) return; // a release or close takes over, or the lease already ended
        const why = err instanceof NotHeldError ? "renewal refused" : "renewal failed";
        this.finish(new LeaseLostError(`ticketd: lease lost: ${this.name}: ${why}: ${(err as Error).message}`, { cause: err }));
        return;
      }
    }
  }
}
