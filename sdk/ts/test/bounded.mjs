// Bounded waits for watch events: every await of an event in these tests
// has a limit, so a change the watch never delivers fails the test, naming
// what it waited for, instead of hanging the suite. The limits are generous
// (a busy machine, a leadership change settling); they bound a wait, they
// do not pace the test.

/** EVENT_MS bounds the wait for one watch event or a watch's start. */
export const EVENT_MS = 20_000;

/** within settles as promise does, or rejects after ms naming what. */
export function within(promise, ms, what) {
  let timer;
  const limit = new Promise((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what}: nothing within ${ms} ms`)), ms);
  });
  return Promise.race([promise, limit]).finally(() => clearTimeout(timer));
}

/**
 * openWatch begins iterating w (the first next() opens the stream) and
 * waits, bounded, for the start the server announces. It returns the
 * iterator, the pending first event and the index the watch starts after.
 */
export async function openWatch(w, what) {
  const it = w[Symbol.asyncIterator]();
  const first = it.next();
  first.catch(() => {}); // awaited later, through nextEvent's bound
  const at = await within(w.started, EVENT_MS, `${what}: the watch's start`);
  return { it, first, at };
}

/** nextEvent awaits the next event of pending (default it.next()), bounded. */
export async function nextEvent(it, what, pending = it.next()) {
  const r = await within(pending, EVENT_MS, what);
  if (r.done) throw new Error(`${what}: the watch ended`);
  return r.value;
}
