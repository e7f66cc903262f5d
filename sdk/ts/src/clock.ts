// Monotonic time, timers and abortable sleeps. A client and its leases read
// time through one Clock (Client.clock), so that tests can drive a lease's
// renewals and local deadline with a fake clock instead of waiting.

/** Clock is where a client reads the time and sets its timers. */
export interface Clock {
  /** now returns a monotonic time in milliseconds (performance.now: not wall-clock, never jumps). */
  now(): number;
  /** setTimer runs fn once, ms milliseconds from now (at once for ms ≤ 0, on a later turn); the returned function cancels it. */
  setTimer(fn: () => void, ms: number): () => void;
  /** timeoutSignal returns a signal that aborts ms milliseconds from now (ms ≥ 0, rounded up). */
  timeoutSignal(ms: number): AbortSignal;
}

/**
 * systemClock is the real one: performance.now, setTimeout, and
 * AbortSignal.timeout (whose timer does not keep a Node process alive).
 */
export const systemClock: Clock = {
  now: () => performance.now(),
  setTimer(fn, ms) {
    const t = setTimeout(fn, Math.max(0, ms));
    return () => clearTimeout(t);
  },
  timeoutSignal: (ms) => AbortSignal.timeout(Math.max(1, Math.ceil(ms))),
};

/**
 * sleep waits ms milliseconds of clock, or until signal aborts; it resolves
 * to false when signal aborted (at once if it already had).
 */
export function sleep(clock: Clock, ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    let cancel = () => {};
    const onAbort = () => {
      cancel();
      resolve(false);
    };
    cancel = clock.setTimer(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/**
 * backoffMs returns the n-th retry delay: d = min(base·2ⁿ, max), drawn
 * uniformly from [d/2, d] ("equal jitter", as the Go SDK's backoff).
 */
export function backoffMs(baseMs: number, maxMs: number, n: number): number {
  n = Math.max(n, 0);
  const d = n < 30 ? Math.min(baseMs * 2 ** n, maxMs) : maxMs;
  return d / 2 + Math.random() * (d / 2);
}
