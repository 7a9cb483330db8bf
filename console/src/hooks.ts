// Data loading: a call made when its inputs change, optionally repeated while the tab is
// visible (paused while it is hidden), keeping the last answer on screen while the next loads.

import { useEffect, useRef, useState } from "preact/hooks";
import { describeError, type ApiErrorInfo } from "./api.js";

export interface Query<T> {
  data: T | undefined;
  error: ApiErrorInfo | undefined;
  loading: boolean;
  /** Ask again now. */
  reload: () => void;
}

interface State<T> {
  key: string;
  data?: T;
  error?: ApiErrorInfo;
  loading: boolean;
}

function keyOf(deps: readonly unknown[]): string {
  return JSON.stringify(deps, (_, v: unknown) => (typeof v === "bigint" ? `${v}n` : v));
}

/**
 * Calls `fn` whenever `deps` change (its answer is dropped when they changed meanwhile), and
 * every `refreshMs` after an answer while the document is visible (0: never again).
 */
export function useQuery<T>(
  fn: (signal: AbortSignal) => Promise<T>,
  deps: readonly unknown[],
  { refreshMs = 0, enabled = true }: { refreshMs?: number; enabled?: boolean } = {},
): Query<T> {
  const key = keyOf(deps);
  const [state, setState] = useState<State<T>>({ key, loading: enabled });
  const fnRef = useRef(fn);
  fnRef.current = fn;
  const [tick, setTick] = useState(0);

  useEffect(() => {
    if (!enabled) return;
    const ac = new AbortController();
    let timer: ReturnType<typeof setTimeout> | undefined;
    let waitingForVisible = false;
    const run = async () => {
      setState((s) => (s.key === key ? (s.loading ? s : { ...s, loading: true }) : { key, loading: true }));
      try {
        const data = await fnRef.current(ac.signal);
        if (ac.signal.aborted) return;
        setState({ key, data, loading: false });
      } catch (e) {
        if (ac.signal.aborted) return;
        setState((s) => ({ key, data: s.key === key ? s.data : undefined, error: describeError(e), loading: false }));
      }
      if (refreshMs > 0 && !ac.signal.aborted) timer = setTimeout(due, refreshMs);
    };
    const due = () => {
      if (document.hidden) waitingForVisible = true;
      else void run();
    };
    const visible = () => {
      if (!document.hidden && waitingForVisible) {
        waitingForVisible = false;
        void run();
      }
    };
    document.addEventListener("visibilitychange", visible);
    void run();
    return () => {
      ac.abort();
      if (timer) clearTimeout(timer);
      document.removeEventListener("visibilitychange", visible);
    };
  }, [key, tick, refreshMs, enabled]);

  const current = state.key === key;
  return {
    data: current ? state.data : undefined,
    error: current ? state.error : undefined,
    loading: current ? state.loading : enabled,
    reload: () => setTick((t) => t + 1),
  };
}

/** A value that changes `ms` after it last changed (for inputs typed into). */
export function useDebounced<T>(value: T, ms: number): T {
  const [v, setV] = useState(value);
  useEffect(() => {
    const t = setTimeout(() => setV(value), ms);
    return () => clearTimeout(t);
  }, [value, ms]);
  return v;
}

/** Re-renders every `ms` (relative times). */
export function useNow(ms = 15_000): number {
  const [now, setNow] = useState(Date.now());
  useEffect(() => {
    const t = setInterval(() => setNow(Date.now()), ms);
    return () => clearInterval(t);
  }, [ms]);
  return now;
}

/** Sets the document title while a page is shown. */
export function useTitle(title: string): void {
  useEffect(() => {
    document.title = title ? `${title} · Waymark` : "Waymark";
  }, [title]);
}
