// A fake Clock (src/clock.ts) for unit tests: time stands still until the
// test advances it, and then the timers that fall due fire in time order,
// each followed by the promise chains it starts. A lease's renewals and
// local deadline can then be checked to the millisecond, without waiting.

/**
 * settle lets the promise chains that are ready run: the client's calls
 * through an in-memory transport take only promise turns and immediates,
 * never timers. It bounds the turns it gives (a fixed number), not a time.
 */
export async function settle() {
  for (let i = 0; i < 100; i++) await new Promise((resolve) => setImmediate(resolve));
}

export class FakeClock {
  #t = 0;
  #seq = 0;
  /** @type {{at: number, seq: number, fn: () => void, live: boolean}[]} */
  #timers = [];

  now() {
    return this.#t;
  }

  setTimer(fn, ms) {
    const timer = { at: this.#t + Math.max(0, ms), seq: this.#seq++, fn, live: true };
    this.#timers.push(timer);
    return () => {
      timer.live = false;
    };
  }

  timeoutSignal(ms) {
    const ac = new AbortController();
    this.setTimer(() => ac.abort(new DOMException("The operation was aborted due to timeout", "TimeoutError")), Math.max(1, Math.ceil(ms)));
    return ac.signal;
  }

  /** pending returns how many timers are set and not yet fired or cancelled. */
  pending() {
    return this.#timers.filter((x) => x.live).length;
  }

  /**
   * advance moves time forward by ms: every timer due by then fires, the
   * earliest first (those due together in the order they were set), at
   * its own time, with the promise chains it starts settled before the
   * next one fires.
   */
  async advance(ms) {
    const end = this.#t + ms;
    for (;;) {
      await settle();
      this.#timers = this.#timers.filter((x) => x.live);
      let next;
      for (const x of this.#timers) {
        if (x.at <= end && (next === undefined || x.at < next.at || (x.at === next.at && x.seq < next.seq))) next = x;
      }
      if (next === undefined) break;
      this.#t = Math.max(this.#t, next.at);
      next.live = false;
      next.fn();
    }
    this.#t = end;
    await settle();
  }
}
