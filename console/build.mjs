// Bundles the console into a folder (default ../server/assets/console/, which the server embeds): app.js, app.css and index.html, minified.
// Deterministic: the same sources and lock file make the same bytes (no timestamps, no absolute
// paths, no source map), because `make check-dist` rebuilds and compares with the committed dist.
//
//   node build.mjs [out-dir]

import { build } from "esbuild";
import { mkdir, readFile, rm, writeFile } from "node:fs/promises";
import { dirname, resolve } from "node:path";
import { fileURLToPath } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
const out = resolve(process.argv[2] ?? "../server/assets/console");

await rm(out, { recursive: true, force: true });
await mkdir(out, { recursive: true });

const result = await build({
  absWorkingDir: here,
  entryPoints: { app: "src/main.tsx" },
  outdir: out,
  bundle: true,
  minify: true,
  format: "esm",
  target: ["es2022", "chrome111", "firefox113", "safari16.4"],
  platform: "browser",
  jsx: "automatic",
  jsxImportSource: "preact",
  sourcemap: false,
  legalComments: "none",
  charset: "utf8",
  treeShaking: true,
  define: { "process.env.NODE_ENV": '"production"' },
  logLevel: "warning",
  metafile: true,
});

const html = await readFile(resolve(here, "src/index.html"), "utf8");
await writeFile(resolve(out, "index.html"), html);

for (const [file, info] of Object.entries(result.metafile.outputs)) {
  console.log(`${file.replace(/^.*\//, "")}\t${info.bytes} bytes`);
}
