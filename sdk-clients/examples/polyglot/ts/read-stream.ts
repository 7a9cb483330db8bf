// The TypeScript client of the polyglot example: it starts the Python workflow "countdown" and
// follows its stream "countdown" live with `for await`, printing each value (as JSON, one a
// line) the moment the workflow writes it. The loop ends when the workflow closes the stream.
//
//   WAYMARK_SERVER=127.0.0.1:7450 node dist/read-stream.js [workflow-id] [N]

import { Client } from "waymark-sdk";

const workflowId = process.argv[2] ?? "countdown-1";
const n = Number(process.argv[3] ?? 3);

const client = new Client(); // WAYMARK_SERVER, else http://127.0.0.1:7450
// The same id again returns the same workflow, so a second run reads the same stream.
await client.start("countdown", n, { workflowId });
for await (const { value } of client.readStream(workflowId, "countdown")) {
  console.log(JSON.stringify(value));
}
