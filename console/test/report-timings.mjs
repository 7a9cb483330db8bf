// Prints the browser test's timings (its `CONSOLE_TIMINGS {...}` line, in the TAP output file
// named on the command line) as `make bench` reports its figures: each against its target, never
// a pass mark.
import { readFileSync } from "node:fs";

const tap = readFileSync(process.argv[2], "utf8");
const line = tap.split("\n").find((l) => l.includes("CONSOLE_TIMINGS "));
if (!line) {
  console.error("no CONSOLE_TIMINGS line in the browser test's output");
  process.exit(1);
}
const t = JSON.parse(line.slice(line.indexOf("CONSOLE_TIMINGS ") + "CONSOLE_TIMINGS ".length));
const mark = (ms) => (ms <= 300 ? "met" : "NOT met");
console.log(`console on ${t.rows} workflows (${t.rows_on_page} a page):`);
console.log(`  list, navigation to painted (ms)      ${t.list_ms}  target <= 300 ms: ${mark(t.list_ms)}`);
console.log(`  workflow page, to painted (ms)        ${t.workflow_ms}  target <= 300 ms: ${mark(t.workflow_ms)}`);
console.log(`  assets, gzipped (kB)                  ${(t.assets_gzip_bytes / 1024).toFixed(1)}  target < 500 kB`);
