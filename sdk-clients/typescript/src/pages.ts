// Lists the server answers a page at a time, read to the end.

import { repeatable, type Attempt } from "./repeat.js";

/**
 * Reads a list to its end: calls `page` with each page token in turn ("" for the first) until a
 * response's `nextPageToken` is empty, and returns every page's `items`, in order. A page may be
 * shorter than the others (its payloads filled the response) and not be the last: only the
 * empty token ends the list. Each page is its own call, made again with the same token while the
 * server answers UNAVAILABLE (see `repeatable`); the caller's `timeoutMs` covers every page
 * together, as it would one call, and its `signal` ends any of them.
 */
export async function readAll<R extends { nextPageToken: string }, T>(
  forMs: number,
  options: { signal?: AbortSignal; timeoutMs?: number } | undefined,
  page: (pageToken: string, a: Attempt) => Promise<R>,
  items: (r: R) => T[],
): Promise<T[]> {
  const until = options?.timeoutMs !== undefined ? Date.now() + options.timeoutMs : undefined;
  const all: T[] = [];
  let pageToken = "";
  do {
    const timeoutMs = until === undefined ? undefined : Math.max(until - Date.now(), 0);
    const r = await repeatable(forMs, { signal: options?.signal, timeoutMs }, (a) => page(pageToken, a));
    all.push(...items(r));
    pageToken = r.nextPageToken;
  } while (pageToken);
  return all;
}
