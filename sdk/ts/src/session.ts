// Session: one lease that many locks are held under (etcd clientv3
// concurrency.Session over an etcd lease, Consul sessions), kept alive in
// the background. It mirrors the Go SDK's Session (sdk/session.go).
import type { Client } from "./client.js";
import { LeaseLostError, ReleasedError, SessionNotFoundError } from "./errors.js";
import { Keeper } from "./keeper.js";

/**
 * Session is an open session: its id (LockOptions.session), and a signal
 * that aborts when the session — and with it every lock held under it —
 * may have ended. It sends KeepAlive every ttl/3 from the send time of the
 * last acknowledged one, retrying through leader changes (one KeepAlive
 * renews every lock under it in one replicated command), until close(), a
 * refused KeepAlive (the session had ended), its local deadline (see Keeper:
 * the margin of a Lease), or Client.close(). Leases taken under it follow
 * its signal. Made by Client.createSession.
 */
export class Session extends Keeper {
  /** The session's id (AcquireRequest.session; never 0n). */
  readonly id: bigint;

  private closed = false;
  private closing: Promise<void> | undefined;

  /** @internal Made by Client.createSession from its answer: ttlMs acknowledged for a request sent at sentAt. */
  constructor(c: Client, id: bigint, ttlMs: number, sentAt: number) {
    super(c, `session ${id}`, ttlMs, sentAt, (ttl, signal) => c.keepAliveWith(id, ttl, signal));
    this.id = id;
  }

  /**
   * close stops the keep-alives and ends the session on the servers, which
   * release every lock held under it in one committed entry (etcd
   * LeaseRevoke, Consul session destroy). The signals of the session and of
   * its leases abort when it returns (reason ReleasedError). A second call
   * after success resolves at once. Throws SessionNotFoundError (the session
   * had already ended), AmbiguousError, or the call's error; the
   * keep-alives are stopped anyway, so the session ends when its TTL runs
   * out.
   */
  async close(opts: { signal?: AbortSignal } = {}): Promise<void> {
    if (this.closed) return;
    while (this.closing) await this.closing.catch(() => undefined);
    if (this.closed) return;
    this.closing = (async () => {
      await this.stopRenewals();
      try {
        await this.c.closeSession(this.id, opts);
        this.closed = true;
        this.finish(new ReleasedError(`ticketd: session ${this.id} closed`));
      } catch (err) {
        const msg = err instanceof SessionNotFoundError ? "lease lost" : "lease lost: keep-alives stopped by close, close failed";
        this.finish(new LeaseLostError(`ticketd: ${msg}: ${(err as Error).message}`, { cause: err }));
        throw err;
      }
    })();
    try {
      await this.closing;
    } finally {
      this.closing = undefined;
    }
  }
}
