// Finding and reaching the server: one HTTP/2 connection per Client or Worker, gRPC protocol.

import type { Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";

/** The default server: `WAYMARK_SERVER`, else `http://127.0.0.1:7450`. */
export function defaultServer(): string {
  const env = process.env.WAYMARK_SERVER?.trim();
  return env ? normalize(env) : "http://127.0.0.1:7450";
}

/** Accepts `host:port` as well as a URL. */
export function normalize(address: string): string {
  return address.includes("://") ? address : `http://${address}`;
}

export function transport(address: string): Transport {
  return createGrpcTransport({
    baseUrl: normalize(address),
    // Keep long-lived worker streams and idle clients alive through NATs and proxies.
    pingIntervalMs: 20_000,
    pingTimeoutMs: 60_000,
    pingIdleConnection: true,
  });
}
