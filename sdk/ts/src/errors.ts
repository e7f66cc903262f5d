// Error classes of @ticketd/client. They mirror the Go SDK's sentinels
// (sdk/errors.go): match them with `instanceof`, never with message text.
// When a server answered, the ConnectError it sent is the `cause`.
import { Code, ConnectError } from "@connectrpc/connect";
import { LeaderHintSchema, LimitMismatchSchema, WatchOutOfRangeSchema } from "./gen/ticket/v1/lock_pb.js";

/** Base class of every error this package throws. */
export class TicketdError extends Error {
  /** The connect code of the server's answer, when there was one. */
  readonly code: Code | undefined;
  constructor(message: string, options?: { cause?: unknown; code?: Code }) {
    super(message, { cause: options?.cause });
    this.name = new.target.name;
    this.code = options?.code;
  }
}

/** The key is held by another owner and the request did not wait (server code AlreadyExists; Go: ErrLocked). */
export class LockedError extends TicketdError {}

/** No lock on the key with that token: released, expired or granted to someone else since (server code NotFound; Go: ErrNotHeld). */
export class NotHeldError extends TicketdError {}

/**
 * The session a request named is unknown, ended, or (for acquire) another
 * principal's: its locks are gone; open a new session (server code NotFound
 * on CreateSession's siblings and on an acquire under a session; Go:
 * ErrSessionNotFound). It is a NotHeldError too.
 */
export class SessionNotFoundError extends NotHeldError {}

/**
 * The request conflicts with the key's state (FailedPrecondition): for
 * instance a renew of a lock held under a session, whose lease is the
 * session's (keep the session alive instead). Nothing changed.
 */
export class FailedPreconditionError extends TicketdError {}

/**
 * An acquire gave a limit other than the one every acquirer of the key must
 * give while it has holders or waiters (FailedPrecondition with a
 * LimitMismatch detail; Go: *LimitMismatchError, ErrLimitMismatch).
 * Nothing changed.
 */
export class LimitMismatchError extends FailedPreconditionError {
  /** The key's current limit: semaphore slots, or 0 for a lock (exclusive or shared). */
  readonly limit: number;
  constructor(message: string, limit: number, options?: { cause?: unknown; code?: Code }) {
    super(message, options);
    this.limit = limit;
  }
}

/** The request is malformed or out of the server's bounds; nothing changed (InvalidArgument). */
export class InvalidArgumentError extends TicketdError {}

/** A server limit (lock-table size, queue length) was reached; nothing changed (ResourceExhausted). */
export class ResourceExhaustedError extends TicketdError {}

/** No node could serve the request before the call ended (Unavailable; retried by the client until then). */
export class UnavailableError extends TicketdError {}

/** The caller's principal may not do this on that key (PermissionDenied). */
export class PermissionDeniedError extends TicketdError {}

/** The request carried no valid credentials (Unauthenticated). */
export class UnauthenticatedError extends TicketdError {}

/** The client was closed. */
export class ClosedError extends TicketdError {}

/**
 * A state-changing request (acquire, release) may or may not have taken
 * effect, and the client could not find out before the call ended (Go:
 * *AmbiguousError, ErrAmbiguous). After an ambiguous acquire the key may be
 * held for `owner` until its lease runs out; a later lock() with the same
 * owner gets that grant back.
 */
export class AmbiguousError extends TicketdError {
  /** "acquire" or "release". */
  readonly op: string;
  /** The lock key of the request. */
  readonly key: string;
  /** The owner id the request carried. */
  readonly owner: string;
  constructor(op: string, key: string, owner: string, cause: unknown) {
    super(`ticketd: ${op} ${JSON.stringify(key)} (owner ${JSON.stringify(owner)}): outcome unknown: ${messageOf(cause)}`, { cause });
    this.op = op;
    this.key = key;
    this.owner = owner;
  }
}

/**
 * The lease may have ended without release(): its local deadline passed
 * without an acknowledged renewal, or the server refused a renewal (then
 * `cause` is a NotHeldError). It is the abort reason of Lease.signal.
 */
export class LeaseLostError extends TicketdError {}

/** The abort reason of Lease.signal after release() released the lock. */
export class ReleasedError extends TicketdError {}

/**
 * A watch asked for a start index older than the node's retained history
 * (OutOfRange with a WatchOutOfRange detail): list the locks again, then
 * watch from the list's readIndex + 1.
 */
export class WatchOutOfRangeError extends TicketdError {
  /** The oldest index a watch can start from on that node (0n when not told). */
  readonly oldestIndex: bigint;
  constructor(message: string, oldestIndex: bigint, cause: unknown) {
    super(message, { cause, code: Code.OutOfRange });
    this.oldestIndex = oldestIndex;
  }
}

/**
 * How one attempt failed, as far as retrying is concerned (Go: failure).
 * The values are the retry classes of sdk/testdata/client-spec.json.
 */
export const enum Failure {
  /** The server gave a definitive answer: do not retry. */
  Final = "final",
  /** The request never reached a server (connection refused). */
  NotSent = "not_sent",
  /** Retryable, and the request may have taken effect. */
  Retry = "retry",
}

/** classify tells how an attempt's error is handled (Go: classify). */
export function classify(err: unknown): Failure {
  if (hasCode(err, "ECONNREFUSED")) return Failure.NotSent;
  const ce = ConnectError.from(err);
  switch (ce.code) {
    case Code.Unavailable:
    case Code.DeadlineExceeded:
    case Code.Canceled:
      return Failure.Retry;
    case Code.Aborted:
      // ticketd sends Aborted only to a try-acquire that waiting requests
      // are queued ahead of (LockedError): final. One with a local cause
      // (not sent by a server) is retried.
      return ce.cause !== undefined ? Failure.Retry : Failure.Final;
    case Code.Unknown:
    case Code.Internal:
      // A reset or half-read connection surfaces as one of these with a
      // local cause; a code a server sent has none.
      return ce.cause !== undefined ? Failure.Retry : Failure.Final;
  }
  return Failure.Final;
}

/** leaderHint returns the leader API address a node attached to its error, or "". */
export function leaderHint(err: unknown): string {
  if (!(err instanceof ConnectError)) return "";
  for (const h of err.findDetails(LeaderHintSchema)) {
    if (h.leaderAddr !== "") return h.leaderAddr;
  }
  return "";
}

/** oldestIndexOf returns the WatchOutOfRange detail's oldest index, or 0n. */
export function oldestIndexOf(err: ConnectError): bigint {
  for (const d of err.findDetails(WatchOutOfRangeSchema)) return d.oldestIndex;
  return 0n;
}

/** limitOf returns the LimitMismatch detail's limit, or undefined when err has none. */
export function limitOf(err: ConnectError): number | undefined {
  for (const d of err.findDetails(LimitMismatchSchema)) return d.limit;
  return undefined;
}

/** sessionOps are the operations whose NotFound answer means the session is gone (Go: sessionOps). */
const sessionOps = new Set(["acquire", "keepalive", "close session", "get session"]);

/** wrapErr turns an attempt's error into the error the caller sees (Go: wrapErr). */
export function wrapErr(op: string, key: string, err: unknown): TicketdError {
  if (err instanceof TicketdError) return err;
  const ce = ConnectError.from(err);
  const msg = `ticketd: ${opKey(op, key)}: ${ce.message}`;
  const o = { cause: err, code: ce.code };
  switch (ce.code) {
    case Code.AlreadyExists:
    case Code.Aborted: // a reader behind a waiting writer, without wait
      return new LockedError(msg, o);
    case Code.NotFound:
      return sessionOps.has(op) ? new SessionNotFoundError(msg, o) : new NotHeldError(msg, o);
    case Code.FailedPrecondition: {
      const limit = limitOf(ce);
      return limit === undefined ? new FailedPreconditionError(msg, o) : new LimitMismatchError(msg, limit, o);
    }
    case Code.InvalidArgument:
      return new InvalidArgumentError(msg, o);
    case Code.ResourceExhausted:
      return new ResourceExhaustedError(msg, o);
    case Code.PermissionDenied:
      return new PermissionDeniedError(msg, o);
    case Code.Unauthenticated:
      return new UnauthenticatedError(msg, o);
    case Code.OutOfRange:
      return new WatchOutOfRangeError(msg, oldestIndexOf(ce), err);
    case Code.Unavailable:
      return new UnavailableError(msg, o);
  }
  return new TicketdError(msg, o);
}

/** opKey names an operation in messages: `acquire "k"` or `status`. */
export function opKey(op: string, key: string): string {
  return key === "" ? op : `${op} ${JSON.stringify(key)}`;
}

function messageOf(e: unknown): string {
  return e instanceof Error ? e.message : String(e);
}

function hasCode(err: unknown, code: string): boolean {
  for (let e: unknown = err, i = 0; e !== undefined && e !== null && i < 8; i++) {
    if (typeof e === "object" && (e as { code?: unknown }).code === code) return true;
    e = (e as { cause?: unknown }).cause;
  }
  return false;
}
