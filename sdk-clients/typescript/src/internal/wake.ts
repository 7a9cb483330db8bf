// A wakeup flag for one waiting workflow: the server's Wakeup (or a cancel) rings it; a wait ends
// on a ring, a timeout, or an abort. A ring with nobody waiting is kept for the next wait, so a
// wakeup arriving between the server's WAITING answer and the wait is not lost.

export class Wake {
  private permit = false;
  private waiter?: () => void;

  ring(): void {
    if (this.waiter) {
      const w = this.waiter;
      this.waiter = undefined;
      w();
    } else this.permit = true;
  }

  /** Resolves on a ring, after `ms` (never when Infinity), or when `signal` aborts. */
  wait(ms: number, signal: AbortSignal): Promise<void> {
    if (this.permit || signal.aborted) {
      this.permit = false;
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      // setTimeout holds at most ~24.8 days; a longer wait just wakes early and waits again.
      const timer = Number.isFinite(ms) ? setTimeout(done, Math.min(Math.max(ms, 0), 2 ** 31 - 1)) : undefined;
      const onAbort = () => done();
      signal.addEventListener("abort", onAbort, { once: true });
      const self = this;
      function done() {
        if (timer) clearTimeout(timer);
        signal.removeEventListener("abort", onAbort);
        if (self.waiter === done) self.waiter = undefined;
        resolve();
      }
      this.waiter = done;
    });
  }
}

/** Sleeps `ms`, ending early (without error) when `signal` aborts. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve) => {
    if (signal?.aborted) return resolve();
    const timer = setTimeout(done, Math.min(Math.max(ms, 0), 2 ** 31 - 1));
    const onAbort = () => done();
    signal?.addEventListener("abort", onAbort, { once: true });
    function done() {
      clearTimeout(timer);
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }
  });
}
