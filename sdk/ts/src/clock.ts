// Monotonic time and abortable sleeps, shared by the client and its leases.

/** now returns a monotonic time in milliseconds (performance.now: not wall-clock, never jumps). */
export function now(): number {
  return performance.now();
}

/**
 * sleep waits ms milliseconds, or until signal aborts; it resolves to false
 * when signal aborted (at once if it already had).
 */
export function sleep(ms: number, signal?: AbortSignal): Promise<boolean> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve(false);
    const onAbort = () => {
      clearTimeout(t);
      resolve(false);
    };
    const t = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve(true);
    }, Math.max(0, ms));
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

/** timeoutSignal is AbortSignal.timeout for any non-negative number of milliseconds (rounded up). */
export function timeoutSignal(ms: number): AbortSignal {
  return AbortSignal.timeout(Math.max(1, Math.ceil(ms)));
}
