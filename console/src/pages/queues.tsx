// Queues: their limits and what they hold now, with the dispatches of the last 15 minutes.

import { useState } from "preact/hooks";
import { durationFromMs } from "@bufbuild/protobuf/wkt";
import { clients } from "../api.js";
import { BarChart, Dialog, Dur, Empty, ErrorBox, Field, Fields, Link, Loading, PageHead, Section, Sparkline, Tag, Time } from "../components.js";
import type { Queue } from "../gen/waymark/v1/queue_pb.js";
import { durationMs, humanDuration } from "../format.js";
import { useQuery, useTitle } from "../hooks.js";
import { navigate, paths } from "../router.js";
import { useCaps } from "../session.js";
import { WorkersTable } from "./workers.js";

const REFRESH_MS = 5000;
const CHART_LABEL = "dispatched by this replica, per minute, last 15 min";

async function allQueues(signal: AbortSignal): Promise<Queue[]> {
  const out: Queue[] = [];
  let pageToken = "";
  for (;;) {
    const r = await clients.queues.listQueues({ pageToken, pageSize: 1000 }, { signal });
    out.push(...r.queues);
    if (!r.nextPageToken || out.length >= 10_000) return out;
    pageToken = r.nextPageToken;
  }
}

function limit(v: number | undefined): string {
  return v === undefined ? "—" : v.toLocaleString();
}

function rateLimit(q: Queue): string {
  if (!q.rateLimit) return "—";
  return `${q.rateLimit.maxStarts.toLocaleString()} / ${humanDuration(durationMs(q.rateLimit.period) ?? 0)}`;
}

export function QueuesPage({ ns }: { ns: string }) {
  useTitle(`Queues · ${ns}`);
  const caps = useCaps();
  const q = useQuery((signal) => allQueues(signal), [ns], { refreshMs: REFRESH_MS });
  const [creating, setCreating] = useState(false);
  return (
    <div class="page">
      <PageHead title="Queues" sub={<>Namespace <code>{ns}</code>; what each holds now (unfinished workflows), refreshed every 5 s</>}>
        {caps.write && (
          <button type="button" class="btn" data-testid="queue-create" onClick={() => setCreating(true)}>
            New queue
          </button>
        )}
      </PageHead>
      {creating && <LimitsDialog onClose={() => setCreating(false)} onDone={(name) => navigate(paths.queue(ns, name))} />}
      {q.error && <ErrorBox error={q.error} />}
      {!q.data ? (
        !q.error && <Loading what="Loading queues" />
      ) : q.data.length === 0 ? (
        <Empty>No queue yet.</Empty>
      ) : (
        <div class="table-wrap">
          <table class="table">
            <thead>
              <tr>
                <th>Queue</th>
                <th class="num">Enqueued</th>
                <th class="num">Running</th>
                <th class="num">Delayed</th>
                <th class="num" title="How long the oldest enqueued workflow has waited">
                  Oldest waiting
                </th>
                <th class="num">Partitions</th>
                <th class="num" title="Per worker / across the fleet / per partition">
                  Concurrency
                </th>
                <th>Rate limit</th>
                <th title={CHART_LABEL}>Dispatched / min</th>
              </tr>
            </thead>
            <tbody>
              {q.data.map((queue) => {
                const s = queue.stats;
                const per = s?.dispatchedPerMinute ?? [];
                return (
                  <tr key={queue.name} data-testid="queue-row" data-queue={queue.name}>
                    <td>
                      <Link href={paths.queue(ns, queue.name)}>{queue.name}</Link>
                    </td>
                    <td class="num">
                      <Link href={paths.workflows(ns, new URLSearchParams({ queue: queue.name, status: "ENQUEUED" }))}>{String(s?.enqueued ?? 0n)}</Link>
                    </td>
                    <td class="num">{String(s?.pending ?? 0n)}</td>
                    <td class="num">{String(s?.delayed ?? 0n)}</td>
                    <td class="num">
                      <Dur ms={durationMs(s?.oldestEnqueuedAge)} />
                    </td>
                    <td class="num">{String(s?.partitions ?? 0n)}</td>
                    <td class="num">
                      {limit(queue.workerConcurrency)} / {limit(queue.globalConcurrency)} / {limit(queue.partitionConcurrency)}
                    </td>
                    <td>{rateLimit(queue)}</td>
                    <td>
                      <Sparkline values={per} title={`${per.reduce((a, b) => a + b, 0)} ${CHART_LABEL}`} />
                    </td>
                  </tr>
                );
              })}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

export function QueuePage({ ns, name }: { ns: string; name: string }) {
  useTitle(`Queue ${name}`);
  const caps = useCaps();
  const [dialog, setDialog] = useState<"edit" | "delete" | undefined>();
  const q = useQuery((signal) => clients.queues.getQueue({ name }, { signal }).then((r) => r.queue), [ns, name], { refreshMs: REFRESH_MS });
  const workers = useQuery((signal) => clients.workers.listWorkers({ queueName: name }, { signal }), [ns, name], { refreshMs: REFRESH_MS });
  const queue = q.data;
  const s = queue?.stats;
  const per = s?.dispatchedPerMinute ?? [];
  return (
    <div class="page">
      <nav class="crumbs" aria-label="Breadcrumb">
        <Link href={paths.queues(ns)}>Queues</Link> <span aria-hidden="true">/</span> {name}
      </nav>
      <PageHead title={<>Queue {name}</>} sub="Refreshed every 5 s">
        <Link class="btn" href={paths.workflows(ns, new URLSearchParams({ queue: name }))}>
          Its workflows
        </Link>
        {caps.write && queue && (
          <>
            <button type="button" class="btn" data-testid="queue-edit" onClick={() => setDialog("edit")}>
              Edit limits
            </button>
            {name !== "default" && (
              <button type="button" class="btn danger" data-testid="queue-delete" onClick={() => setDialog("delete")}>
                Delete
              </button>
            )}
          </>
        )}
      </PageHead>
      {dialog === "edit" && queue && <LimitsDialog queue={queue} onClose={() => setDialog(undefined)} onDone={() => q.reload()} />}
      {dialog === "delete" && (
        <Dialog
          title={`Delete queue ${name}`}
          danger
          confirmLabel="Delete the queue"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => {
            await clients.queues.deleteQueue({ name });
            setDialog(undefined);
            navigate(paths.queues(ns));
          }}
        >
          <p>Its workflows keep their queue name; no worker takes them until a queue of that name exists again.</p>
        </Dialog>
      )}
      {q.error && <ErrorBox error={q.error} />}
      {!queue ? (
        !q.error && <Loading what="Loading the queue" />
      ) : (
        <>
          <div class="stats" data-testid="queue-stats">
            <Stat label="Enqueued" value={String(s?.enqueued ?? 0n)} href={paths.workflows(ns, new URLSearchParams({ queue: name, status: "ENQUEUED" }))} />
            <Stat label="Running" value={String(s?.pending ?? 0n)} href={paths.workflows(ns, new URLSearchParams({ queue: name, status: "PENDING" }))} />
            <Stat label="Delayed" value={String(s?.delayed ?? 0n)} href={paths.workflows(ns, new URLSearchParams({ queue: name, status: "DELAYED" }))} />
            <Stat label="Oldest waiting" value={s?.oldestEnqueuedAge ? humanDuration(durationMs(s.oldestEnqueuedAge) ?? 0) : "—"} />
            <Stat label="Partitions waiting" value={String(s?.partitions ?? 0n)} />
          </div>
          <div class="grid-2">
            <Section title="Limits">
              <Fields>
                <Field label="Per worker">{limit(queue.workerConcurrency)}</Field>
                <Field label="Across the fleet">{limit(queue.globalConcurrency)}</Field>
                <Field label="Per partition">{limit(queue.partitionConcurrency)}</Field>
                <Field label="Rate limit">{rateLimit(queue)}</Field>
                <Field label="Created">
                  <Time ts={queue.createdAt} />
                </Field>
                <Field label="Updated">
                  <Time ts={queue.updatedAt} />
                </Field>
              </Fields>
              {queue.workerConcurrency === undefined && queue.globalConcurrency === undefined && queue.partitionConcurrency === undefined && !queue.rateLimit && (
                <p class="muted small">No limit: workers take its workflows as fast as their credits allow.</p>
              )}
            </Section>
            <Section title="Dispatches">
              {per.length ? (
                <BarChart
                  values={per}
                  label={CHART_LABEL}
                  height={96}
                  barLabel={(i, v) => `${v} dispatched ${per.length - 1 - i === 0 ? "this minute (so far)" : `${per.length - 1 - i} min ago`}`}
                />
              ) : (
                <p class="muted">The server gave no dispatch counts.</p>
              )}
              <p class="muted small">
                <Tag>{per.reduce((a, b) => a + b, 0).toLocaleString()}</Tag> in the last 15 minutes, by the replica that answered (other replicas' dispatches are not counted).
              </p>
            </Section>
          </div>
          <Section title="Workers taking from it">
            {workers.error && <ErrorBox error={workers.error} />}
            {workers.data && <WorkersTable ns={ns} workers={workers.data.workers} />}
          </Section>
        </>
      )}
    </div>
  );
}

function Stat({ label, value, href }: { label: string; value: string; href?: string }) {
  return (
    <div class="stat">
      <div class="stat-value num">{href ? <Link href={href}>{value}</Link> : value}</div>
      <div class="stat-label">{label}</div>
    </div>
  );
}

/** A limit field: empty is no limit. */
function LimitInput({ label, value, set, testid }: { label: string; value: string; set: (v: string) => void; testid: string }) {
  return (
    <label class="stack">
      <span>{label}</span>
      <input type="number" min={1} step={1} value={value} placeholder="no limit" onInput={(e) => set((e.target as HTMLInputElement).value)} data-testid={testid} />
    </label>
  );
}

const count = (v: string): number | undefined => (v.trim() === "" ? undefined : Math.max(0, Math.floor(Number(v))));

/** Create a queue (no `queue`), or change a queue's limits: every limit is written, an empty one removed. */
function LimitsDialog({ queue, onClose, onDone }: { queue?: Queue; onClose: () => void; onDone: (name: string) => void }) {
  const str = (v: number | undefined) => (v === undefined ? "" : String(v));
  const [name, setName] = useState(queue?.name ?? "");
  const [worker, setWorker] = useState(str(queue?.workerConcurrency));
  const [global, setGlobal] = useState(str(queue?.globalConcurrency));
  const [partition, setPartition] = useState(str(queue?.partitionConcurrency));
  const [starts, setStarts] = useState(str(queue?.rateLimit?.maxStarts));
  const [period, setPeriod] = useState(queue?.rateLimit ? String((durationMs(queue.rateLimit.period) ?? 0) / 1000) : "");
  const rate = count(starts);
  const periodMs = period.trim() === "" ? undefined : Math.round(Number(period) * 1000);
  const rateBad = (rate === undefined) !== (periodMs === undefined) || (periodMs !== undefined && !(periodMs >= 1));
  return (
    <Dialog
      title={queue ? `Limits of queue ${queue.name}` : "New queue"}
      confirmLabel={queue ? "Save limits" : "Create queue"}
      confirmDisabled={!name.trim() || rateBad}
      onClose={onClose}
      onConfirm={async () => {
        const body = {
          name: name.trim(),
          workerConcurrency: count(worker),
          globalConcurrency: count(global),
          partitionConcurrency: count(partition),
          rateLimit: rate !== undefined && periodMs !== undefined ? { maxStarts: rate, period: durationFromMs(periodMs) } : undefined,
        };
        if (queue) {
          await clients.queues.updateQueue({
            queue: body,
            updateMask: { paths: ["worker_concurrency", "global_concurrency", "partition_concurrency", "rate_limit"] },
          });
        } else {
          await clients.queues.createQueue({ queue: body });
        }
        onClose();
        onDone(body.name);
      }}
    >
      {!queue && (
        <label class="stack">
          <span>Name</span>
          <input value={name} onInput={(e) => setName((e.target as HTMLInputElement).value)} data-testid="queue-name" spellcheck={false} />
        </label>
      )}
      <div class="row-gap">
        <LimitInput label="Per worker" value={worker} set={setWorker} testid="limit-worker" />
        <LimitInput label="Across the fleet" value={global} set={setGlobal} testid="limit-global" />
        <LimitInput label="Per partition" value={partition} set={setPartition} testid="limit-partition" />
      </div>
      <div class="row-gap">
        <LimitInput label="Rate: starts" value={starts} set={setStarts} testid="limit-rate-starts" />
        <label class="stack">
          <span>per seconds</span>
          <input type="number" min={0.001} step="any" value={period} placeholder="—" onInput={(e) => setPeriod((e.target as HTMLInputElement).value)} data-testid="limit-rate-period" />
        </label>
      </div>
      {rateBad && <p class="note">A rate limit needs both a number of starts and a period (1 ms to 24 h).</p>}
      <p class="muted small">Empty fields are no limit.</p>
    </Dialog>
  );
}
