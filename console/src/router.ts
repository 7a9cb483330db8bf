// Path-based routes with the namespace in the path, so every page is a link that can be shared.
// The server answers index.html for every path that is not a file of dist/.

import { useEffect, useState } from "preact/hooks";

export type Route =
  | { name: "root" }
  | { name: "signin" }
  | { name: "admin" }
  | { name: "workflows"; ns: string }
  | { name: "workflow"; ns: string; id: string }
  | { name: "compare"; ns: string }
  | { name: "queues"; ns: string }
  | { name: "queue"; ns: string; queue: string }
  | { name: "workers"; ns: string }
  | { name: "schedules"; ns: string }
  | { name: "schedule"; ns: string; schedule: string }
  | { name: "notfound" };

function decode(segment: string): string {
  try {
    return decodeURIComponent(segment);
  } catch {
    return segment;
  }
}

export function parseRoute(pathname: string): Route {
  const parts = pathname.split("/").filter((p) => p !== "").map(decode);
  if (parts.length === 0) return { name: "root" };
  if (parts[0] === "signin" && parts.length === 1) return { name: "signin" };
  if (parts[0] === "admin" && parts.length === 1) return { name: "admin" };
  if (parts[0] !== "ns" || parts.length < 2) return { name: "notfound" };
  if (parts.length === 2) return { name: "workflows", ns: parts[1]! };
  const ns = parts[1]!;
  const [, , section, item, ...rest] = parts;
  if (rest.length > 0) return { name: "notfound" };
  switch (section) {
    case "workflows":
      return item === undefined ? { name: "workflows", ns } : { name: "workflow", ns, id: item };
    case "compare":
      return item === undefined ? { name: "compare", ns } : { name: "notfound" };
    case "queues":
      return item === undefined ? { name: "queues", ns } : { name: "queue", ns, queue: item };
    case "workers":
      return item === undefined ? { name: "workers", ns } : { name: "notfound" };
    case "schedules":
      return item === undefined ? { name: "schedules", ns } : { name: "schedule", ns, schedule: item };
    default:
      return { name: "notfound" };
  }
}

/**
 * A path segment, encoded (ids may hold `/`, spaces, anything). Dots too: the server answers a
 * path whose last segment has a dot as a file (`/app.js`), not with the app.
 */
export const seg = (s: string): string => encodeURIComponent(s).replace(/\./g, "%2E");

export const paths = {
  workflows: (ns: string, query?: URLSearchParams | string) => {
    const q = query === undefined ? "" : String(query);
    return `/ns/${seg(ns)}/workflows${q ? `?${q}` : ""}`;
  },
  workflow: (ns: string, id: string) => `/ns/${seg(ns)}/workflows/${seg(id)}`,
  compare: (ns: string, a = "", b = "") => {
    const q = new URLSearchParams();
    if (a) q.set("a", a);
    if (b) q.set("b", b);
    const s = String(q);
    return `/ns/${seg(ns)}/compare${s ? `?${s}` : ""}`;
  },
  queues: (ns: string) => `/ns/${seg(ns)}/queues`,
  queue: (ns: string, name: string) => `/ns/${seg(ns)}/queues/${seg(name)}`,
  workers: (ns: string) => `/ns/${seg(ns)}/workers`,
  schedules: (ns: string) => `/ns/${seg(ns)}/schedules`,
  schedule: (ns: string, name: string) => `/ns/${seg(ns)}/schedules/${seg(name)}`,
};

const NAVIGATE = "waymark:navigate";

/** Go to `url` (same origin) without a reload; `replace` keeps the history entry. */
export function navigate(url: string, { replace = false } = {}): void {
  if (url === location.pathname + location.search) return;
  if (replace) history.replaceState(null, "", url);
  else history.pushState(null, "", url);
  window.dispatchEvent(new Event(NAVIGATE));
}

/** Change the query of the current page (filters): replaced, so typing does not flood history. */
export function setQuery(params: URLSearchParams, { push = false } = {}): void {
  const q = String(params);
  const url = location.pathname + (q ? `?${q}` : "");
  if (url === location.pathname + location.search) return;
  if (push) history.pushState(null, "", url);
  else history.replaceState(null, "", url);
  window.dispatchEvent(new Event(NAVIGATE));
}

export interface Location {
  pathname: string;
  search: string;
}

function current(): Location {
  return { pathname: location.pathname, search: location.search };
}

/** The current location, re-rendering on every navigation (links, back/forward, filters). */
export function useLocation(): Location {
  const [loc, setLoc] = useState(current);
  useEffect(() => {
    const update = () =>
      setLoc((old) => (old.pathname === location.pathname && old.search === location.search ? old : current()));
    window.addEventListener("popstate", update);
    window.addEventListener(NAVIGATE, update);
    return () => {
      window.removeEventListener("popstate", update);
      window.removeEventListener(NAVIGATE, update);
    };
  }, []);
  return loc;
}

/** Whether a click should be left to the browser (new tab, download, another button). */
export function isPlainClick(e: MouseEvent): boolean {
  return e.button === 0 && !e.metaKey && !e.ctrlKey && !e.shiftKey && !e.altKey && !e.defaultPrevented;
}
