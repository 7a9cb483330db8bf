// Finding and reaching the server: one HTTP/2 connection per Client or Worker, gRPC protocol,
// in the clear or over TLS (mutual TLS with a client certificate), with the API key and the
// namespace sent as metadata on every call. The one place both the Client and the Worker build
// their connection.

import { readFileSync } from "node:fs";
import type { Interceptor, Transport } from "@connectrpc/connect";
import { createGrpcTransport } from "@connectrpc/connect-node";
import { ConfigurationError } from "./errors.js";

/** Where the server is and how to reach it; every option falls back to its environment variable. */
export interface ConnectionOptions {
  /**
   * `https://host:port` (TLS), `http://host:port` (plaintext) or `host:port` (TLS when any TLS
   * option is set, else plaintext). `WAYMARK_SERVER`, else `127.0.0.1:7450`.
   */
  server?: string;
  /**
   * The certificate authority (or authorities) to trust instead of the system's: a PEM file's
   * path, or PEM text. `WAYMARK_TLS_CA` (a path). Without it TLS trusts the system roots.
   */
  tlsCa?: string | Uint8Array;
  /** A client certificate for mutual TLS (path or PEM), with `tlsKey`. `WAYMARK_TLS_CERT` (a path). */
  tlsCert?: string | Uint8Array;
  /** The client certificate's private key (path or PEM). `WAYMARK_TLS_KEY` (a path). */
  tlsKey?: string | Uint8Array;
  /** Sent as `authorization: Bearer <key>` on every call. `WAYMARK_API_KEY`. */
  apiKey?: string;
  /** Sent as `waymark-namespace` on every call. `WAYMARK_NAMESPACE`. */
  namespace?: string;
  /**
   * Allows sending the API key over plaintext (`http://`, or `host:port` without a TLS option)
   * to a host that is not loopback (`localhost`, `127.x.x.x`, `::1`), where it would cross the
   * network unencrypted: without it, such options throw `ConfigurationError`. Left undefined:
   * `WAYMARK_INSECURE=1` (or `true`, `yes`, `on`); given, it wins over the variable.
   */
  insecure?: boolean;
}

/** The default address when neither `server` nor `WAYMARK_SERVER` gives one. */
const DEFAULT_ADDRESS = "127.0.0.1:7450";

/** Options that configure the connection itself: given with a `transport` of your own, they would be ignored. */
const CONNECTION_ONLY: (keyof ConnectionOptions)[] = ["tlsCa", "tlsCert", "tlsKey", "apiKey", "namespace", "insecure"];

/** What a connection comes to: the URL, the TLS material, the metadata of every call. */
export interface ResolvedConnection {
  baseUrl: string;
  /** Present for TLS; an absent `ca` trusts the system roots. */
  tls?: { ca?: Buffer; cert?: Buffer; key?: Buffer };
  /** Header name to value, sent on every call (holds the API key: never log it). */
  metadata: Record<string, string>;
}

type Env = Record<string, string | undefined>;

/** An option's value and where it came from (for error messages: never the value itself). */
interface Setting<T> {
  value: T;
  source: string;
}

/**
 * The option when given (`undefined` falls back to `envName`; an empty string means none),
 * else the environment variable's value when it is set and not blank.
 */
function pick<T extends string | Uint8Array>(given: T | undefined, option: string, env: Env, envName: string): Setting<T | string> | undefined {
  if (given !== undefined) {
    if (typeof given === "string" && given.trim() === "") return undefined;
    return { value: typeof given === "string" ? given.trim() : given, source: `the ${option} option` };
  }
  const v = env[envName]?.trim();
  return v ? { value: v, source: envName } : undefined;
}

/**
 * The URL and TLS material `options` (and the environment) come to. Throws `ConfigurationError`
 * for options that contradict each other, a file that cannot be read, or an API key over
 * plaintext to a host that is not loopback without `insecure` (or `WAYMARK_INSECURE`).
 */
export function resolveConnection(options: ConnectionOptions = {}, env: Env = process.env): ResolvedConnection {
  const server = pick(options.server, "server", env, "WAYMARK_SERVER");
  const ca = pick(options.tlsCa, "tlsCa", env, "WAYMARK_TLS_CA");
  const cert = pick(options.tlsCert, "tlsCert", env, "WAYMARK_TLS_CERT");
  const key = pick(options.tlsKey, "tlsKey", env, "WAYMARK_TLS_KEY");
  const tlsSettings = [ca, cert, key].filter((s): s is Setting<string | Uint8Array> => s !== undefined);

  const address = (server?.value as string | undefined) ?? DEFAULT_ADDRESS;
  const scheme = /^([a-z][a-z0-9+.-]*):\/\//i.exec(address)?.[1]?.toLowerCase();
  let tls: boolean;
  let baseUrl: string;
  if (scheme === undefined) {
    tls = tlsSettings.length > 0;
    baseUrl = `${tls ? "https" : "http"}://${address}`;
  } else if (scheme === "https" || scheme === "http") {
    tls = scheme === "https";
    baseUrl = address;
  } else {
    throw new ConfigurationError(
      `the server address ${JSON.stringify(address)} (from ${server?.source}) has scheme ${scheme}: use https:// (TLS), http:// (plaintext) or host:port`,
    );
  }
  if (!tls && tlsSettings.length > 0) {
    throw new ConfigurationError(
      `the server address ${JSON.stringify(address)} (from ${server?.source}) is plaintext http://, ` +
        `yet TLS is configured by ${tlsSettings.map((s) => s.source).join(", ")}: ` +
        `use an https:// address (or host:port), or leave TLS unset`,
    );
  }
  if ((cert === undefined) !== (key === undefined)) {
    const [given, missing] = cert ? [cert, "tlsKey / WAYMARK_TLS_KEY"] : [key!, "tlsCert / WAYMARK_TLS_CERT"];
    throw new ConfigurationError(`a client certificate needs both a certificate and its key: ${given.source} is set, ${missing} is not`);
  }

  const metadata: Record<string, string> = {};
  const apiKey = pick(options.apiKey, "apiKey", env, "WAYMARK_API_KEY");
  if (apiKey) metadata.authorization = `Bearer ${headerValue(apiKey, "the API key")}`;
  const insecure = options.insecure ?? ["1", "true", "yes", "on"].includes(env.WAYMARK_INSECURE?.trim().toLowerCase() ?? "");
  if (apiKey && !tls && !insecure && !isLoopback(baseUrl)) {
    throw new ConfigurationError(
      `an API key is set (from ${apiKey.source}) but the server address ${JSON.stringify(address)} ` +
        `(from ${server?.source ?? "the default"}) is plaintext to a host that is not loopback: the key would be sent unencrypted. ` +
        `Use an https:// address (TLS), or pass insecure: true (or set WAYMARK_INSECURE=1) to send it anyway`,
    );
  }
  const namespace = pick(options.namespace, "namespace", env, "WAYMARK_NAMESPACE");
  if (namespace) metadata["waymark-namespace"] = headerValue(namespace, "the namespace");

  return {
    baseUrl,
    tls: tls ? { ca: pem(ca, "CA"), cert: pem(cert, "client certificate"), key: pem(key, "client key") } : undefined,
    metadata,
  };
}

/** Whether the URL's host is this machine: `localhost`, `127.x.x.x` or `::1`. */
function isLoopback(baseUrl: string): boolean {
  let host: string;
  try {
    // The URL parser lower-cases the host and writes an IPv4 or IPv6 address in its usual form.
    host = new URL(baseUrl).hostname;
  } catch {
    return false;
  }
  host = host.replace(/\.$/, "");
  return host === "localhost" || /^127\.\d+\.\d+\.\d+$/.test(host) || host === "[::1]";
}

/** A value a header can carry (visible ASCII, no spaces); the error never quotes it. */
function headerValue(s: Setting<string>, what: string): string {
  if (typeof s.value !== "string" || !/^[\x21-\x7e]+$/.test(s.value)) {
    throw new ConfigurationError(`${what} (from ${s.source}) holds characters gRPC metadata cannot carry (only visible ASCII, no spaces)`);
  }
  return s.value;
}

/** PEM bytes: given as such, as PEM text, or read from the file a path names. */
function pem(s: Setting<string | Uint8Array> | undefined, what: string): Buffer | undefined {
  if (!s) return undefined;
  if (typeof s.value !== "string") return Buffer.from(s.value);
  if (s.value.includes("-----BEGIN")) return Buffer.from(s.value);
  try {
    return readFileSync(s.value);
  } catch (e) {
    const why = e instanceof Error && "code" in e ? String(e.code) : String(e);
    throw new ConfigurationError(`cannot read the TLS ${what} file ${JSON.stringify(s.value)} (from ${s.source}): ${why}`);
  }
}

/** The default server URL: `WAYMARK_SERVER` (https:// when a WAYMARK_TLS_* variable is set), else 127.0.0.1:7450. */
export function defaultServer(): string {
  const env = process.env;
  const address = env.WAYMARK_SERVER?.trim() || DEFAULT_ADDRESS;
  if (address.includes("://")) return address;
  const tls = ["WAYMARK_TLS_CA", "WAYMARK_TLS_CERT", "WAYMARK_TLS_KEY"].some((n) => env[n]?.trim());
  return `${tls ? "https" : "http"}://${address}`;
}

/**
 * Refuses TLS, API key, namespace and insecure options next to a `transport` of your own: they would be
 * ignored, and a key silently not sent is worse than an error. (`server` is ignored, as always.)
 */
export function checkNoConnectionOptions(options: ConnectionOptions): void {
  const given = CONNECTION_ONLY.filter((k) => options[k] !== undefined);
  if (given.length > 0) {
    throw new ConfigurationError(
      `${given.join(", ")} cannot be given with a transport of your own: build it with createTransport({ ...options, interceptors })`,
    );
  }
}

/**
 * The transport a Client or Worker is given (after checking that no connection option would be
 * ignored with it), else the one its connection options make.
 */
export function ownTransport(options: ConnectionOptions & { transport?: Transport }): Transport {
  if (options.transport) {
    checkNoConnectionOptions(options);
    return options.transport;
  }
  return createTransport(options);
}

/** Sets the connection's metadata on every call: unary, server-streaming and the worker's stream. */
function metadataInterceptor(metadata: Record<string, string>): Interceptor {
  const entries = Object.entries(metadata);
  return (next) => (req) => {
    for (const [name, value] of entries) req.header.set(name, value);
    return next(req);
  };
}

function definedOnly<T extends object>(o: T): Partial<T> {
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/**
 * The largest message Connect may read or write: its own ceiling (4 GiB). The server's limits
 * are the ones that count — the worker keeps under those it is told, and a dispatch carries a
 * workflow's whole history, which may be many payloads — so Connect's must never be what fails
 * first. Said here rather than left to Connect's defaults, which could change.
 */
const CONNECT_MAX_BYTES = 0xffffffff;

/**
 * The transport a Client or Worker uses: gRPC over HTTP/2 to `options.server` (TLS as the
 * options say), the API key and namespace on every call, then `interceptors` of your own.
 * Throws `ConfigurationError` for contradictory options or an unreadable certificate file.
 */
export function createTransport(options: ConnectionOptions & { interceptors?: Interceptor[] } = {}): Transport {
  const c = resolveConnection(options);
  const own = Object.keys(c.metadata).length > 0 ? [metadataInterceptor(c.metadata)] : [];
  return createGrpcTransport({
    baseUrl: c.baseUrl,
    readMaxBytes: CONNECT_MAX_BYTES,
    writeMaxBytes: CONNECT_MAX_BYTES,
    // Connect applies the first interceptor outermost: ours set the metadata before any other sees the call.
    interceptors: [...own, ...(options.interceptors ?? [])],
    // Node's TLS: `ca` replaces the system roots when given; cert and key make it mutual.
    nodeOptions: c.tls ? definedOnly(c.tls) : undefined,
    // Keep long-lived worker streams and idle clients alive through NATs and proxies.
    pingIntervalMs: 20_000,
    pingTimeoutMs: 60_000,
    pingIdleConnection: true,
  });
}
