// Finding and reaching the server: one HTTP/2 connection per Client or Worker, gRPC protocol.

import type { Interceptor, Transport } from "@connectrpc/connect";
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

/**
 * The largest message Connect may read or write: its own ceiling (4 GiB). The server's limits
 * are the ones that count — the worker keeps under those it is told, and a dispatch carries a
 * workflow's whole history, which may be many payloads — so Connect's must never be what fails
 * first. Said here rather than left to Connect's defaults, which could change.
 */
const CONNECT_MAX_BYTES = 0xffffffff;

export function transport(address: string, interceptors: Interceptor[] = []): Transport {
  return createGrpcTransport({
    baseUrl: normalize(address),
    readMaxBytes: CONNECT_MAX_BYTES,
    writeMaxBytes: CONNECT_MAX_BYTES,
    interceptors,
    // Keep long-lived worker streams and idle clients alive through NATs and proxies.
    pingIntervalMs: 20_000,
    pingTimeoutMs: 60_000,
    pingIdleConnection: true,
  });
}
