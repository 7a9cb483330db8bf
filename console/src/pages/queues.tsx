// Queues: their limits and what they hold now, with the dispatches of the last 15 minutes.

import { clients } from "../api.js";
import { BarChart, Dur, Empty, ErrorBox, Field, Fields, Link, Loading, PageHead, Section, Sparkline, Tag, Time } from "../components.js";
import type { Queue } from "../gen/waymark/v1/queue_pb.js";
import { durationMs, humanDuration } from "../format.js";
import { useQuery, useTitle } from "../hooks.js";
import { paths } from "../router.js";
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
  const q = useQuery((signal) => allQueues(signal), [ns], { refreshMs: REFRESH_MS });
  return (
    <div class="page">
      <PageHead title="Queues" sub={<>Namespace <code>{ns}</code>; what each holds now (unfinished workflows), refreshed every 5 s</>} />
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
      </PageHead>
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
