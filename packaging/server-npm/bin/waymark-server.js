#!/usr/bin/env node
// Runs the waymark binary this package bundles (native/waymark) with this process's arguments:
// `npx waymark-server server`, `npx waymark-server workflow list`. Its standard streams are
// this process's, signals sent here are passed on to it, and this process ends as it ends (its
// exit code, or the same signal).
"use strict";

const { spawn } = require("node:child_process");
const fs = require("node:fs");
const path = require("node:path");

const native = path.join(__dirname, "..", "native");
// What the bundled binary was built for (written by packaging/dist.sh).
const target = JSON.parse(fs.readFileSync(path.join(native, "target.json"), "utf8"));

function fail(message) {
  process.stderr.write(`waymark-server: ${message}\n`);
  process.exit(1);
}

if (process.platform !== target.platform || process.arch !== target.arch) {
  fail(
    `this package holds the waymark binary for ${target.platform}-${target.arch} only, ` +
      `not for ${process.platform}-${process.arch}. Build the server from source ` +
      `(cargo build --release -p waymark-server --bin waymark) or use a release archive for your platform.`,
  );
}
const glibc = process.report?.getReport?.().header?.glibcVersionRuntime;
if (!glibc) {
  fail(`the bundled binary needs glibc ${target.glibc} or newer, and this system has no glibc (musl, as on Alpine?).`);
}
const [haveMajor, haveMinor] = glibc.split(".").map(Number);
const [needMajor, needMinor] = target.glibc.split(".").map(Number);
if (haveMajor < needMajor || (haveMajor === needMajor && haveMinor < needMinor)) {
  fail(`the bundled binary needs glibc ${target.glibc} or newer; this system has ${glibc}.`);
}

const binary = path.join(native, "waymark");
try {
  fs.accessSync(binary, fs.constants.X_OK);
} catch {
  // An installer that dropped the executable bit: put it back.
  fs.chmodSync(binary, 0o755);
}

const child = spawn(binary, process.argv.slice(2), { stdio: "inherit" });
const forwarded = ["SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1", "SIGUSR2"];
const forward = (signal) => child.kill(signal);
for (const signal of forwarded) process.on(signal, forward);

child.on("error", (e) => fail(`cannot run ${binary}: ${e.message}`));
child.on("exit", (code, signal) => {
  for (const s of forwarded) process.removeListener(s, forward);
  if (signal) {
    // End the way the binary did: with no handler left, the same signal ends this process.
    process.kill(process.pid, signal);
    return;
  }
  process.exit(code ?? 1);
});
