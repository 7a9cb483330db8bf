// The TypeScript worker of the polyglot example: it serves the remote step "shout", which the
// Python workflow "combine" calls by name. A step is a plain function of its JSON input; a
// throw fails the attempt and the caller's retry policy decides what comes next.
//
//   WAYMARK_SERVER=127.0.0.1:7450 node dist/worker.js

import { Worker } from "@waymark/sdk";

const worker = new Worker({ appName: "polyglot-typescript", appVersion: "1" }); // server: WAYMARK_SERVER

worker.step("shout", (text: string) => `${text.toUpperCase()}!`);

worker.on("connected", () => console.error("TypeScript worker connected; serving step \"shout\""));
await worker.run(); // until SIGINT/SIGTERM; reconnects by itself
