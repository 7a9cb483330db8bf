// The TypeScript worker of the polyglot example: it serves the remote step "shout", which the
// Python workflow "combine" calls by name. A step is a plain function of its JSON input; a
// throw fails the attempt and the caller's retry policy decides what comes next.
//
//   WAYMARK_SERVER=127.0.0.1:7450 node dist/worker.js
//
// With OTEL_EXPORTER_OTLP_ENDPOINT set (an OTLP/gRPC collector), its spans are exported there
// under service.name "polyglot-typescript" (see tracing.ts); they are flushed on SIGINT/SIGTERM.

import { Worker } from "waymark-sdk";
import { installTracing } from "./tracing.js";

const appName = "polyglot-typescript";
const stopTracing = await installTracing(appName);

const worker = new Worker({ appName, appVersion: "1" }); // server: WAYMARK_SERVER

worker.step("shout", (text: string) => `${text.toUpperCase()}!`);

worker.on("connected", () => console.error("TypeScript worker connected; serving step \"shout\""));
await worker.run(); // until SIGINT/SIGTERM; reconnects by itself
await stopTracing(); // the spans still being exported go out before the process ends
