// Lease: a held lock that renews itself and tells, through an AbortSignal,
// when it may have ended. It mirrors the Go SDK's Lease (sdk/lease.go).
import type { Client, Grant } from "./client.js";
import { LeaseLostError, NotHeldError, ReleasedError } from "./errors.js";
import type { Mode } from "./gen/ticket/v1/lock_pb.js";
import { Keeper } from "./keeper.js";
import type { Session } from "./session.js";

/**
 * Lease is a held lock: its key, its fencing token, and a signal that aborts
 * when the lease may have ended. It renews itself every ttl/3 (see Keeper
 * for the local deadline and its margin: Chubby's local lease timeout),
 * until release(), a refused renewal, the local deadline, or
 * Client.close().
 *
 * A lease under a session neither renews itself nor has a local deadline
 * of its own: the session's keep-alives are its renewals. Under a Session
 * object its signal also aborts (LeaseLostError, cause the session's
 * reason; ReleasedError when the session was closed) when the session's
 * does; under a bare session id it aborts on
 * release() or Client.close() only, and whoever keeps the session alive
 * knows when it may have ended.
 */
export class Lease extends Keeper {
  /** The lock key. */
  readonly key: string;
  /** The fencing token (Chubby §2.4 sequencer): pass it with every write to the guarded resource. */
  readonly token: bigint;
  /** The owner id the grant was requested with. */
  readonly owner: string;
  /** The session the lock is held under (0n: none, the lease is its own). */
  readonly session: bigint;
  /** How the lock was requested: Mode.EXCLUSIVE or Mode.SHARED. */
  readonly mode: Mode;
  /** The semaphore's slot count it was requested with (0: a lock). */
  readonly limit: number;

  private readonly under: Session | undefined;
  private released = false;
  private releasing: Promise<void> | undefined;

  /** @internal Made by Client.lock and its variants; s is the Session the grant is under, if given as one. */
  constructor(c: Client, g: Grant, s?: Session) {
    super(c, `key ${JSON.stringify(g.key)} token ${g.token}`, g.ttlMs, g.sentAt,
      g.session !== 0n ? undefined : (ttlMs, signal) => c.renewWith(g.key, g.token, ttlMs, signal));
    this.key = g.key;
    this.token = g.token;
    this.owner = g.owner;
    this.session = g.session;
    this.mode = g.mode;
    this.limit = g.limit;
    this.under = s;
    if (s !== undefined) {
      const onEnd = () => {
        const what = `key ${JSON.stringify(g.key)} token ${g.token}: session ${s.id}`;
        this.finish(s.signal.reason instanceof ReleasedError
          ? new ReleasedError(`ticketd: lease released: ${what} closed`, { cause: s.signal.reason })
          : new LeaseLostError(`ticketd: lease lost: ${what} ended`, { cause: s.signal.reason }));
      };
      if (s.signal.aborted) onEnd();
      else s.signal.addEventListener("abort", onEnd, { once: true });
      this.signal.addEventListener("abort", () => s.signal.removeEventListener("abort", onEnd), { once: true });
    }
  }

  /** The local deadline (performance.now() time); under a Session, the session's. */
  override get deadline(): number {
    return this.under !== undefined && !this.signal.aborted ? this.under.deadline : super.deadline;
  }

  /** Milliseconds left before the local deadline (0 once ended); under a Session, the session's. */
  override remainingMs(): number {
    return this.under !== undefined && !this.signal.aborted ? this.under.remainingMs() : super.remainingMs();
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
      await this.stopRenewals();
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
}
