// A development server for the console: serves the files of a dist folder as `waymark server`
// does (index.html for every path that is not a file, the same content security policy) and
// passes every POST (the gRPC-web calls) on to a running server's console port. With it, a
// change to the console is seen after `make build` and a reload, without building the server
// (which embeds ../server/assets/console/ at compile time).
//
//   node devserver.mjs --upstream http://127.0.0.1:7451 [--listen 127.0.0.1:7461] [--dist dist]
//
// The browser test uses it under WAYMARK_CONSOLE_DEV=1 (see test/console.test.mjs).

import { createServer, request } from "node:http";
import { readFile } from "node:fs/promises";
import { join, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const CSP =
  "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; " +
  "font-src 'self'; object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'";

const TYPES = { html: "text/html; charset=utf-8", js: "text/javascript; charset=utf-8", css: "text/css; charset=utf-8" };

/** Starts the server; resolves to its origin ("http://127.0.0.1:PORT") and a close function. */
export function startDevServer({ upstream, dist = "../server/assets/console", host = "127.0.0.1", port = 0 }) {
  const root = resolve(dist);
  const up = new URL(upstream);
  const server = createServer(async (req, res) => {
    const path = new URL(req.url ?? "/", "http://x").pathname;
    if (req.method === "POST") {
      const headers = { ...req.headers, host: up.host };
      const p = request({ host: up.hostname, port: up.port, method: "POST", path: req.url, headers }, (r) => {
        res.writeHead(r.statusCode ?? 502, r.headers);
        r.pipe(res);
      });
      p.on("error", (e) => {
        res.writeHead(502, { "content-type": "text/plain" });
        res.end(`upstream: ${e.message}\n`);
      });
      res.on("close", () => p.destroy());
      req.pipe(p);
      return;
    }
    if (req.method !== "GET" && req.method !== "HEAD") {
      res.writeHead(405).end();
      return;
    }
    const name = path.replace(/^\/+/, "");
    const last = name.split("/").pop() ?? "";
    let file = "index.html";
    if (name && !name.includes("/") && !name.includes("..") && last.includes(".")) file = name;
    else if (last.includes(".")) file = "";
    try {
      if (!file) throw new Error("not found");
      const body = await readFile(join(root, file));
      res.writeHead(200, {
        "content-type": TYPES[file.split(".").pop()] ?? "application/octet-stream",
        "cache-control": "no-cache",
        "content-security-policy": CSP,
        "x-content-type-options": "nosniff",
        "referrer-policy": "no-referrer",
      });
      res.end(req.method === "HEAD" ? undefined : body);
    } catch {
      res.writeHead(404, { "content-type": "text/plain", "content-security-policy": CSP }).end("not found\n");
    }
  });
  return new Promise((resolveStart, reject) => {
    server.once("error", reject);
    server.listen(port, host, () => {
      const a = server.address();
      resolveStart({ origin: `http://${host}:${a.port}`, close: () => new Promise((r) => server.close(() => r())) });
    });
  });
}

if (process.argv[1] && resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const args = process.argv.slice(2);
  const opt = (name, dflt) => {
    const i = args.indexOf(`--${name}`);
    return i >= 0 ? args[i + 1] : dflt;
  };
  const upstream = opt("upstream", process.env.WAYMARK_CONSOLE_UPSTREAM ?? "http://127.0.0.1:7451");
  const [host, port] = opt("listen", "127.0.0.1:7461").split(":");
  const { origin } = await startDevServer({ upstream, dist: opt("dist", "../server/assets/console"), host, port: Number(port) });
  console.log(`console (dist on disk) at ${origin}/, API calls go to ${upstream}`);
}
