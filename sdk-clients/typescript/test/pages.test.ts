// Lists come a page at a time: the client reads every page, following `nextPageToken` until it
// is empty, and returns the whole list in order. A page shorter than the others (the server stops
// a page before its payloads would pass the response size limit) is not the last, and a page
// answered UNAVAILABLE is asked for again with the same token. First against fake services
// (Connect's in-process router), then against a real server with 260 messages of 64 KiB.

import { test } from "node:test";
import assert from "node:assert/strict";
import { Code, ConnectError, createClient, createRouterTransport } from "@connectrpc/connect";
import { WorkflowService } from "../src/gen/waymark/v1/workflow_pb.js";
import { QueueService } from "../src/gen/waymark/v1/queue_pb.js";
import { ScheduleService } from "../src/gen/waymark/v1/schedule_pb.js";
import { Client, RpcError } from "../src/index.js";
import { toPayload } from "../src/payload.js";
import { createTransport } from "../src/transport.js";
import { startServer, waitFor } from "./harness.js";

/** Item numbers of each page; page i (past the first) is asked for with the token `page-<i>`. */
const PAGES = [[0, 1], [2], [3, 4, 5], [], [6]];
const ALL = PAGES.flat();
/** Every page asked for once, the refused third page twice, with its own token both times. */
const ASKED = ["", "page-1", "page-2", "page-2", "page-3", "page-4"];

/** Answers one list a page at a time, refusing the third page once with UNAVAILABLE. */
class Pager {
  readonly tokens: string[] = [];
  private refused = false;

  page(pageToken: string): { items: number[]; nextPageToken: string } {
    this.tokens.push(pageToken);
    const i = pageToken === "" ? 0 : Number(pageToken.replace(/^page-/, ""));
    if (!(i >= 0 && i < PAGES.length)) throw new ConnectError("page_token is not one this server issued", Code.InvalidArgument);
    if (i === 2 && !this.refused) {
      this.refused = true;
      throw new ConnectError("the database is restarting", Code.Unavailable);
    }
    return { items: PAGES[i]!, nextPageToken: i + 1 < PAGES.length ? `page-${i + 1}` : "" };
  }
}

function fake() {
  const p = {
    steps: new Pager(),
    messages: new Pager(),
    events: new Pager(),
    workflows: new Pager(),
    queues: new Pager(),
    schedules: new Pager(),
  };
  const t = createRouterTransport(({ service }) => {
    service(WorkflowService, {
      listSteps(req) {
        const { items, nextPageToken } = p.steps.page(req.pageToken);
        return { steps: items.map((n) => ({ stepId: n, name: `s${n}`, output: toPayload(n) })), nextPageToken };
      },
      listMessages(req) {
        const { items, nextPageToken } = p.messages.page(req.pageToken);
        return { messages: items.map((n) => ({ messageId: `m${n}`, payload: toPayload(n) })), nextPageToken };
      },
      listEvents(req) {
        const { items, nextPageToken } = p.events.page(req.pageToken);
        return { events: items.map((n) => ({ key: `e${n}`, value: toPayload(n) })), nextPageToken };
      },
      listWorkflows(req) {
        const { items, nextPageToken } = p.workflows.page(req.pageToken);
        return { workflows: items.map((n) => ({ workflowId: `w${n}` })), nextPageToken };
      },
    });
    service(QueueService, {
      listQueues(req) {
        const { items, nextPageToken } = p.queues.page(req.pageToken);
        return { queues: items.map((n) => ({ name: `q${n}` })), nextPageToken };
      },
    });
    service(ScheduleService, {
      listSchedules(req) {
        const { items, nextPageToken } = p.schedules.page(req.pageToken);
        return { schedules: items.map((n) => ({ name: `s${n}` })), nextPageToken };
      },
    });
  });
  return { client: new Client({ transport: t }), pagers: p };
}

function check<T>(pager: Pager, got: T[], expected: (n: number) => T): void {
  assert.deepEqual(got, ALL.map(expected));
  assert.deepEqual(pager.tokens, ASKED);
}

test("steps, messages and events are read to the last page, in order", async () => {
  const { client, pagers } = fake();
  const steps = await client.steps("wf");
  check(
    pagers.steps,
    steps.map((s) => [s.stepId, s.name, s.output]),
    (n) => [n, `s${n}`, n],
  );
  const messages = await client.messages("wf");
  check(
    pagers.messages,
    messages.map((m) => [m.messageId, m.payload]),
    (n) => [`m${n}`, n],
  );
  const events = await client.events("wf");
  check(
    pagers.events,
    events.map((e) => [e.key, e.value]),
    (n) => [`e${n}`, n],
  );
});

test("queues and schedules are read to the last page, in order", async () => {
  const { client, pagers } = fake();
  check(pagers.queues, (await client.queues.list()).map((q) => q.name), (n) => `q${n}`);
  check(pagers.schedules, (await client.schedules.list()).map((s) => s.name), (n) => `s${n}`);
});

test("listAll goes on past a short page, page by page as it is iterated", async () => {
  const { client, pagers } = fake();
  const seen: string[] = [];
  for await (const w of client.listAll({ pageSize: 3 })) {
    seen.push(w.workflowId);
    // Lazy: no page is asked for before the iteration reaches it.
    if (w.workflowId === "w0") assert.deepEqual(pagers.workflows.tokens, [""]);
  }
  check(pagers.workflows, seen, (n) => `w${n}`);
});

test("the caller's timeout covers every page together", async () => {
  let asked = 0;
  const t = createRouterTransport(({ service }) => {
    service(QueueService, {
      async listQueues() {
        asked++;
        await new Promise((r) => setTimeout(r, 40));
        return { queues: [{ name: `q${asked}` }], nextPageToken: `page-${asked}` };
      },
    });
  });
  const client = new Client({ transport: t });
  // Every page is quick, but the list never ends: the whole call times out.
  await assert.rejects(client.queues.list({ timeoutMs: 300 }), (e) => e instanceof RpcError && e.code === Code.DeadlineExceeded);
  assert.ok(asked >= 2 && asked < 20, `asked ${asked} times`);
});

test("260 messages of 64 KiB are listed across pages from a real server", async () => {
  const COUNT = 260;
  const body = "m".repeat(64 * 1024);
  const server = await startServer();
  try {
    const client = server.client;
    const queue = "pages";
    await server.worker({ queues: [queue] }, (w) =>
      // Waits, running, while the messages come in on another topic.
      w.workflow("inbox", async (ctx) => ctx.recv<string>("done", { timeoutMs: 120_000 })),
    );
    const { workflow } = await client.start("inbox", null, { queue });
    const id = workflow.workflowId;
    // Dispatched to the worker; then it waits (PENDING, or DELAYED until its recv times out).
    await waitFor(async () => (await client.get(id)).startedAt !== undefined, "the inbox workflow to be dispatched");
    const sent: string[] = [];
    for (let i = 0; i < COUNT; i++) sent.push((await client.send(id, { i, body }, { topic: "t" })).messageId);

    // The pages as the server answers them, read one by one: about 16 MiB of messages, more
    // than a page carries (twice the 4 MiB payload limit by default).
    const rpc = createClient(WorkflowService, createTransport({ server: server.address }));
    const pages: string[][] = [];
    let pageToken = "";
    do {
      const r = await rpc.listMessages({ workflowId: id, pageToken });
      pages.push(r.messages.map((m) => m.messageId));
      pageToken = r.nextPageToken;
    } while (pageToken);
    assert.ok(pages.length >= 2, `the server answered in one page of ${pages[0]!.length}`);

    const messages = await client.messages(id);
    assert.equal(messages.length, COUNT);
    assert.deepEqual(
      messages.map((m) => m.messageId),
      pages.flat(),
    );
    assert.deepEqual(messages.map((m) => m.messageId).sort(), [...sent].sort());
    const numbers = messages.map((m) => (m.payload as { i: number }).i).sort((a, b) => a - b);
    assert.deepEqual(
      numbers,
      Array.from({ length: COUNT }, (_, i) => i),
    );
    assert.ok(messages.every((m) => m.topic === "t" && (m.payload as { body: string }).body === body));

    await client.send(id, "over", { topic: "done" });
    assert.equal(await client.result(id, { timeoutMs: 60_000 }), "over");
  } finally {
    await server.stop();
  }
});
