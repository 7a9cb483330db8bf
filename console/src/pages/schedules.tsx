// Schedules: their cron, next fire times and last runs, and pause / resume / trigger / backfill.

import { useState } from "preact/hooks";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { clients } from "../api.js";
import { Age, Code as CodeBlock, Dialog, Empty, ErrorBox, Field, Fields, Link, Loading, PageHead, Section, StatusBadge, Tag, Time } from "../components.js";
import type { Schedule } from "../gen/waymark/v1/schedule_pb.js";
import { fromLocalInput, payloadText, plural, toLocalInput } from "../format.js";
import { useQuery, useTitle } from "../hooks.js";
import { navigate, paths } from "../router.js";
import { useCaps } from "../session.js";

async function allSchedules(signal: AbortSignal): Promise<Schedule[]> {
  const out: Schedule[] = [];
  let pageToken = "";
  for (;;) {
    const r = await clients.schedules.listSchedules({ pageToken, pageSize: 1000 }, { signal });
    out.push(...r.schedules);
    if (!r.nextPageToken || out.length >= 10_000) return out;
    pageToken = r.nextPageToken;
  }
}

function Paused({ s }: { s: Schedule }) {
  return s.paused ? (
    <Tag tone="warn" title="Does not fire until resumed">
      ❚❚ paused
    </Tag>
  ) : (
    <Tag tone="ok" title="Fires at its times">
      ● active
    </Tag>
  );
}

export function SchedulesPage({ ns }: { ns: string }) {
  useTitle(`Schedules · ${ns}`);
  const q = useQuery((signal) => allSchedules(signal), [ns], { refreshMs: 10_000 });
  return (
    <div class="page">
      <PageHead title="Schedules" sub={<>Namespace <code>{ns}</code></>} />
      {q.error && <ErrorBox error={q.error} />}
      {!q.data ? (
        !q.error && <Loading what="Loading schedules" />
      ) : q.data.length === 0 ? (
        <Empty>
          No schedule yet. <code>client.schedules.create(…)</code> in an SDK, or <code>waymark schedule create</code>, makes one.
        </Empty>
      ) : (
        <div class="table-wrap">
          <table class="table">
            <thead>
              <tr>
                <th>Schedule</th>
                <th>Cron</th>
                <th>Time zone</th>
                <th>Workflow</th>
                <th>Queue</th>
                <th>State</th>
                <th>Last fire</th>
                <th>Next fire</th>
              </tr>
            </thead>
            <tbody>
              {q.data.map((s) => (
                <tr key={s.name} data-testid="schedule-row" data-schedule={s.name}>
                  <td>
                    <Link href={paths.schedule(ns, s.name)}>{s.name}</Link>
                  </td>
                  <td>
                    <code>{s.cron}</code>
                  </td>
                  <td>{s.timezone || "UTC"}</td>
                  <td class="mono">{s.workflowName}</td>
                  <td>{s.queueName || "default"}</td>
                  <td>
                    <Paused s={s} />
                  </td>
                  <td>
                    <Age ts={s.lastFireTime} />
                  </td>
                  <td>{s.nextFireTime ? <Time ts={s.nextFireTime} /> : <span class="muted">—</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
    </div>
  );
}

export function SchedulePage({ ns, name }: { ns: string; name: string }) {
  useTitle(`Schedule ${name}`);
  const caps = useCaps();
  const q = useQuery((signal) => clients.schedules.getSchedule({ name }, { signal }).then((r) => r.schedule), [ns, name], { refreshMs: 10_000 });
  const prefix = `schedule:${name}:`;
  const runs = useQuery((signal) => clients.workflows.listWorkflows({ workflowIdPrefix: prefix, pageSize: 20 }, { signal }), [ns, name], { refreshMs: 10_000 });
  const [dialog, setDialog] = useState<"pause" | "resume" | "trigger" | "backfill" | undefined>();
  const s = q.data;
  const reload = () => {
    q.reload();
    runs.reload();
  };
  return (
    <div class="page">
      <nav class="crumbs" aria-label="Breadcrumb">
        <Link href={paths.schedules(ns)}>Schedules</Link> <span aria-hidden="true">/</span> {name}
      </nav>
      <PageHead title={<>Schedule {name}</>} sub={s ? <Paused s={s} /> : undefined}>
        {caps.write && s && (
          <>
            {s.paused ? (
              <button type="button" class="btn" data-testid="action-schedule-resume" onClick={() => setDialog("resume")}>
                Resume
              </button>
            ) : (
              <button type="button" class="btn" data-testid="action-schedule-pause" onClick={() => setDialog("pause")}>
                Pause
              </button>
            )}
            <button type="button" class="btn" data-testid="action-schedule-trigger" onClick={() => setDialog("trigger")}>
              Trigger now
            </button>
            <button type="button" class="btn" data-testid="action-schedule-backfill" onClick={() => setDialog("backfill")}>
              Backfill…
            </button>
          </>
        )}
      </PageHead>
      {q.error && <ErrorBox error={q.error} />}
      {!s ? (
        !q.error && <Loading what="Loading the schedule" />
      ) : (
        <>
          <div class="grid-2">
            <Section title="Definition">
              <Fields>
                <Field label="Cron">
                  <code>{s.cron}</code>
                </Field>
                <Field label="Time zone">{s.timezone || "UTC"}</Field>
                <Field label="Workflow">
                  <Link href={paths.workflows(ns, new URLSearchParams({ name: s.workflowName }))} class="mono">
                    {s.workflowName}
                  </Link>
                </Field>
                <Field label="Queue">
                  <Link href={paths.queue(ns, s.queueName || "default")}>{s.queueName || "default"}</Link>
                </Field>
                <Field label="Last fire">
                  <Time ts={s.lastFireTime} />
                </Field>
                <Field label="Created">
                  <Time ts={s.createdAt} />
                </Field>
                <Field label="Updated">
                  <Time ts={s.updatedAt} />
                </Field>
              </Fields>
              <h3>Input</h3>
              <CodeBlock text={payloadText(s.input)} />
            </Section>
            <Section title="Next fires" testid="upcoming">
              {s.paused ? (
                <p class="muted">Paused: it does not fire until resumed.</p>
              ) : s.upcomingFireTimes.length === 0 ? (
                <p class="muted">{s.nextFireTime ? "" : "The expression names no future time."}</p>
              ) : (
                <ol class="fire-times">
                  {s.upcomingFireTimes.map((t, i) => (
                    <li key={i}>
                      <Time ts={t} />
                    </li>
                  ))}
                </ol>
              )}
              {!s.paused && s.upcomingFireTimes.length === 0 && s.nextFireTime && (
                <p>
                  Next: <Time ts={s.nextFireTime} />
                </p>
              )}
            </Section>
          </div>
          <Section
            title="Last runs"
            actions={
              <Link href={paths.workflows(ns, new URLSearchParams({ prefix }))} class="btn small">
                All its runs
              </Link>
            }
          >
            {runs.error && <ErrorBox error={runs.error} />}
            {runs.data && runs.data.workflows.length === 0 && <p class="muted">It has started no workflow yet.</p>}
            {runs.data && runs.data.workflows.length > 0 && (
              <div class="table-wrap">
                <table class="table">
                  <thead>
                    <tr>
                      <th>Workflow</th>
                      <th>Status</th>
                      <th>Created</th>
                    </tr>
                  </thead>
                  <tbody>
                    {runs.data.workflows.map((w) => (
                      <tr key={w.workflowId} data-testid="schedule-run">
                        <td>
                          <Link href={paths.workflow(ns, w.workflowId)} class="mono">
                            {w.workflowId}
                          </Link>
                        </td>
                        <td>
                          <StatusBadge status={w.status} />
                        </td>
                        <td>
                          <Time ts={w.createdAt} />
                        </td>
                      </tr>
                    ))}
                  </tbody>
                </table>
              </div>
            )}
          </Section>
        </>
      )}
      {dialog === "pause" && (
        <Dialog
          title="Pause the schedule"
          confirmLabel="Pause"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => {
            await clients.schedules.pauseSchedule({ name });
            setDialog(undefined);
            reload();
          }}
        >
          <p>It stops firing until resumed.</p>
        </Dialog>
      )}
      {dialog === "resume" && (
        <Dialog
          title="Resume the schedule"
          confirmLabel="Resume"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => {
            await clients.schedules.resumeSchedule({ name });
            setDialog(undefined);
            reload();
          }}
        >
          <p>It fires again from the first time after now; the times passed while paused are skipped (Backfill starts them).</p>
        </Dialog>
      )}
      {dialog === "trigger" && (
        <Dialog
          title="Trigger the schedule"
          confirmLabel="Start it now"
          onClose={() => setDialog(undefined)}
          onConfirm={async () => {
            const r = await clients.schedules.triggerSchedule({ name });
            setDialog(undefined);
            if (r.workflow) navigate(paths.workflow(ns, r.workflow.workflowId));
          }}
        >
          <p>Start its workflow once, now, whether or not it is paused. Its fire times do not change.</p>
        </Dialog>
      )}
      {dialog === "backfill" && <BackfillDialog ns={ns} name={name} onClose={() => setDialog(undefined)} onDone={reload} />}
    </div>
  );
}

function BackfillDialog({ ns, name, onClose, onDone }: { ns: string; name: string; onClose: () => void; onDone: () => void }) {
  const now = Date.now();
  const [start, setStart] = useState(new Date(now - 3_600_000).toISOString());
  const [end, setEnd] = useState(new Date(now).toISOString());
  const [result, setResult] = useState<{ created: number; existed: number; first?: string } | undefined>();
  const valid = start && end && Date.parse(start) <= Date.parse(end) && Date.parse(end) <= Date.now() + 1000;
  return (
    <Dialog
      title="Backfill the schedule"
      confirmLabel="Start the missed runs"
      wide
      confirmDisabled={!valid}
      onClose={onClose}
      onConfirm={
        result
          ? undefined
          : async () => {
              const r = await clients.schedules.backfillSchedule({ name, startTime: timestampFromMs(Date.parse(start)), endTime: timestampFromMs(Date.parse(end)) });
              const created = r.runs.filter((x) => x.created).length;
              setResult({ created, existed: r.runs.length - created, first: r.runs[0]?.workflowId });
              onDone();
            }
      }
    >
      {result ? (
        <p data-testid="backfill-result">
          Started {plural(result.created, "workflow")}; {plural(result.existed, "fire time")} had one already.{" "}
          <Link href={paths.workflows(ns, new URLSearchParams({ prefix: `schedule:${name}:` }))}>Its runs</Link>
        </p>
      ) : (
        <>
          <p>Start one workflow for every fire time in the range, both ends included (at most 1,000; the end not in the future). Times that already have their workflow get no second one.</p>
          <div class="row-gap">
            <label class="stack">
              <span>From</span>
              <input type="datetime-local" step={1} value={toLocalInput(start)} onInput={(e) => setStart(fromLocalInput((e.target as HTMLInputElement).value))} data-testid="backfill-start" />
            </label>
            <label class="stack">
              <span>Through</span>
              <input type="datetime-local" step={1} value={toLocalInput(end)} onInput={(e) => setEnd(fromLocalInput((e.target as HTMLInputElement).value))} data-testid="backfill-end" />
            </label>
          </div>
        </>
      )}
    </Dialog>
  );
}
