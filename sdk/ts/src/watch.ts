// Watch as an async iterator that resumes: after a retryable failure it
// reconnects (to the next node in rotation) from the last index seen,
// skipping that index's events already yielded,
// so no change is missed or repeated (the server streams each change once,
// in apply order, with the log index that applied it).
import { Code, ConnectError } from "@connectrpc/connect";
import type { Client } from "./client.js";
import { sleep } from "./clock.js";
import { Failure, WatchOutOfRangeError, classify, oldestIndexOf, wrapErr } from "./errors.js";
import { WatchEvent_Type } from "./gen/ticket/v1/lock_pb.js";
import type { Mode } from "./gen/ticket/v1/lock_pb.js";

export { WatchEvent_Type as LockEventType };

/** Options of Client.watch. */
export interface WatchOptions {
  /**
   * First log index wanted; 0n (default) means from now on: after the index
   * the server announces (Watch.started). A watcher that needs every change
   * after a point it already knows (a listLocks readIndex, the last index it
   * handled) passes that point + 1n.
   */
  startIndex?: bigint;
  /**
   * Start with every lock held under the prefix as a GRANTED event whose
   * index is the read index; changes after it follow. If the stream breaks
   * before the first change arrives, the listing is sent again on resume
   * (so GRANTED events of existing locks may repeat).
   */
  includeExisting?: boolean;
  /** Skip the linearizable start (the node does not first catch up with the leader's commit index). */
  stale?: boolean;
  /** Ends the iteration when aborted. */
  signal?: AbortSignal;
}

/**
 * Watch is what Client.watch returns: an async iterable of the changes
 * (LockEvent), and the start the server announced. The stream opens when
 * iteration begins (the first next()).
 */
export interface Watch extends AsyncIterable<LockEvent> {
  /**
   * Resolves with the log index the watch starts after, once the server has
   * announced it (its STARTED message: after the existing locks with
   * includeExisting) and before any change is yielded: every change with a
   * greater index follows, once, none at or below it. Await it before making
   * changes the watch must see. Rejects if the watch ends before it started
   * (it never resolves against a server too old to announce its start).
   */
  readonly started: Promise<bigint>;
}

/** LockEvent is one change to a lock, as Watch streams it. */
export interface LockEvent {
  /** What happened: GRANTED, RELEASED, EXPIRED or RENEWED (never STARTED: see Watch.started). */
  type: WatchEvent_Type;
  /** The event type's name: "GRANTED", "RELEASED", "EXPIRED", "RENEWED". */
  typeName: string;
  /** The lock key. */
  key: string;
  /** The holder's fencing token: a shared key or a semaphore has one event per holder. */
  token: bigint;
  /** The holder's owner id (GRANTED only). */
  owner: string;
  /** The lease in milliseconds (GRANTED, RENEWED). */
  leaseMs: number;
  /** The Raft log index of the entry that applied the change (a session's end: one event per holder, all at its index). */
  index: bigint;
  /** The key's mode (GRANTED; RELEASED and EXPIRED of a shared key or a semaphore). */
  mode: Mode;
  /** The key's semaphore limit, 0 for a lock (as mode). */
  limit: number;
  /** The session the holder is under, 0n for none (GRANTED, and the events of a session's end). */
  session: bigint;
}

/** watch implements Client.watch. */
export function watch(c: Client, prefix: string, opts: WatchOptions): Watch {
  let resolve!: (index: bigint) => void;
  let reject!: (err: unknown) => void;
  const started = new Promise<bigint>((res, rej) => {
    resolve = res;
    reject = rej;
  });
  started.catch(() => {}); // a watch nobody asks when it started is not an unhandled rejection
  const events = watchEvents(c, prefix, opts, resolve, reject);
  return { started, [Symbol.asyncIterator]: () => events };
}

/**
 * watchEvents streams the changes, calling onStarted with the first start
 * the server announces and onEnd when the iteration ends (a no-op after
 * onStarted).
 */
async function* watchEvents(
  c: Client, prefix: string, opts: WatchOptions, onStarted: (index: bigint) => void, onEnd: (err: unknown) => void,
): AsyncGenerator<LockEvent> {
  try {
    yield* streamEvents(c, prefix, opts, onStarted);
  } catch (err) {
    onEnd(err);
    throw err;
  } finally {
    onEnd(new Error(`ticketd: watch ${JSON.stringify(prefix)} ended before it started`));
  }
}

/** streamEvents runs the streams of one watch, resuming after failures. */
async function* streamEvents(c: Client, prefix: string, opts: WatchOptions, onStarted: (index: bigint) => void): AsyncGenerator<LockEvent> {
  const signal = opts.signal ? AbortSignal.any([opts.signal, c.closedSignal]) : c.closedSignal;
  let startIndex = opts.startIndex ?? 0n;
  let includeExisting = opts.includeExisting ?? false;
  let listedAt = -1n; // index of the existing-locks listing while no change has followed
  // A stream may be cut in the middle of one entry's events (a session's
  // end makes one per holder): resume at the last index received and skip
  // the events of it already yielded; every node sends one index's events
  // in the same order (docs/api.md, Watch).
  let lastIndex = -1n;
  let seenAtLast = 0;
  let attempt = 0;
  while (!signal.aborted) {
    const { n } = c.route(false);
    let skip = !includeExisting && startIndex === lastIndex ? seenAtLast : 0;
    try {
      const stream = n.lock.watch(
        { prefix, startIndex: includeExisting ? 0n : startIndex, includeExisting, stale: opts.stale ?? false },
        { signal, headers: c.headers() },
      );
      for await (const e of stream) {
        attempt = 0;
        if (e.type === WatchEvent_Type.STARTED) {
          // The stream starts after e.index (docs/api.md#watch). Until a
          // change arrives, or once a listing is complete, that is where
          // the watch stands: a stream cut now resumes right after it (from
          // 0n it would start anew, later, and miss the changes between).
          if (includeExisting || (startIndex === 0n && lastIndex < 0n)) {
            includeExisting = false;
            startIndex = e.index + 1n;
          }
          onStarted(e.index);
          continue;
        }
        if (skip > 0 && e.index === lastIndex) {
          skip--; // yielded before the stream was cut
          continue;
        }
        skip = 0;
        if (includeExisting) {
          if (listedAt < 0n) listedAt = e.index;
          if (e.index !== listedAt) includeExisting = false; // the listing is complete
        }
        if (e.index === lastIndex) {
          seenAtLast++;
        } else {
          lastIndex = e.index;
          seenAtLast = 1;
        }
        startIndex = e.index;
        yield {
          type: e.type,
          typeName: WatchEvent_Type[e.type] ?? String(e.type),
          key: e.key,
          token: e.token,
          owner: e.owner,
          leaseMs: Number(e.leaseMs),
          index: e.index,
          mode: e.mode,
          limit: e.limit,
          session: e.session,
        };
      }
      if (includeExisting && listedAt >= 0n) {
        // Ended cleanly during the listing: resume after it.
        includeExisting = false;
        startIndex = listedAt + 1n;
      }
    } catch (err) {
      if (signal.aborted) return;
      const ce = ConnectError.from(err);
      if (ce.code === Code.OutOfRange) {
        throw new WatchOutOfRangeError(`ticketd: watch ${JSON.stringify(prefix)}: ${ce.message}`, oldestIndexOf(ce), err);
      }
      if (ce.code !== Code.ResourceExhausted && classify(err) === Failure.Final) throw wrapErr("watch", prefix, err);
      listedAt = includeExisting ? -1n : listedAt;
      c.nodeFailed(n);
    }
    if (!(await sleep(c.clock, c.retryDelay(undefined, attempt++), signal))) return;
  }
}
