// One workflow: what it is, its steps on a timeline, what it waits for, its messages, events,
// streams (followed live), children and lineage, and the actions a key may take on it.

import { useEffect, useRef, useState } from "preact/hooks";
import { create, fromJson, type JsonValue } from "@bufbuild/protobuf";
import { ValueSchema } from "@bufbuild/protobuf/wkt";
import { clients, Code } from "../api.js";
import { Age, Code as CodeBlock, copyText, Dialog, Dur, ErrorBox, Field, Fields, Link, Loading, PageHead, Section, StatusBadge, Tag, Time } from "../components.js";
import { PayloadSchema, WorkflowStatus, type Step, type Workflow } from "../gen/waymark/v1/types_pb.js";
import { payloadText, plural, statusName, TERMINAL, tsMs } from "../format.js";
import { useQuery, useTitle } from "../hooks.js";
import { navigate, paths } from "../router.js";
import { useCaps } from "../session.js";
import { spans, Timeline, tookText } from "./timeline.js";

const REFRESH_MS = 2000;
export const STEP_CAP = 2000;

/** Every recorded step, page after page, at most STEP_CAP. */
export async function allSteps(id: string, signal?: AbortSignal): Promise<{ steps: Step[]; truncated: boolean }> {
  const steps: Step[] = [];
  let pageToken = "";
  for (;;) {
    const r = await clients.workflows.listSteps({ workflowId: id, pageToken, pageSize: 1000 }, { signal });
    steps.push(...r.steps);
    if (steps.length >= STEP_CAP) return { steps: steps.slice(0, STEP_CAP), truncated: steps.length > STEP_CAP || r.nextPageToken !== "" };
    if (!r.nextPageToken) return { steps, truncated: false };
    pageToken = r.nextPageToken;
  }
}

let workflowPaintedMarked = false;

export function WorkflowPage({ ns, id }: { ns: string; id: string }) {
  useTitle(id);
  const caps = useCaps();
  const wfq = useQuery((signal) => clients.workflows.getWorkflow({ workflowId: id }, { signal }).then((r) => r.workflow), [ns, id], {
    refreshMs: REFRESH_MS,
  });
  const w = wfq.data;
  const live = w !== undefined && !TERMINAL.has(w.status);
  // Steps follow the workflow while it runs; once it ended they are read once more and kept.
  const stepsq = useQuery((signal) => allSteps(id, signal), [ns, id], { refreshMs: live ? REFRESH_MS : 0, enabled: w !== undefined });

  const ready = w !== undefined && stepsq.data !== undefined;
  useEffect(() => {
    if (ready && !workflowPaintedMarked) {
      workflowPaintedMarked = true;
      performance.mark("waymark:workflow-painted");
    }
  }, [ready]);

  const [dialog, setDialog] = useState<"cancel" | "resume" | "fork" | "delete" | "send" | undefined>();

  if (wfq.error && !w) {
    return (
      <div class="page">
        <PageHead title={<span class="mono">{id}</span>} />
        <ErrorBox error={wfq.error} title={wfq.error.code === Code.NotFound ? "No such workflow" : "Could not read the workflow"} />
        <Link href={paths.workflows(ns)}>← All workflows</Link>
      </div>
    );
  }
  if (!w) return <Loading what="Loading the workflow" />;

  const steps = stepsq.data?.steps ?? [];
  const terminal = TERMINAL.has(w.status);
  const resumable = w.status === WorkflowStatus.CANCELLED || w.status === WorkflowStatus.ERROR || w.status === WorkflowStatus.MAX_RECOVERY_ATTEMPTS_EXCEEDED;
  const mayReceive = !(w.status === WorkflowStatus.SUCCESS || w.status === WorkflowStatus.ERROR || w.status === WorkflowStatus.CONTINUED_AS_NEW);
  const started = tsMs(w.startedAt);
  const created = tsMs(w.createdAt);
  const updated = tsMs(w.updatedAt);
  const compareHref = w.forkedFromWorkflowId ? paths.compare(ns, w.forkedFromWorkflowId, w.workflowId) : paths.compare(ns, w.workflowId, "");
  const tags = Object.entries(w.tags);

  return (
    <div class="page workflow-page">
      <nav class="crumbs" aria-label="Breadcrumb">
        <Link href={paths.workflows(ns)}>Workflows</Link> <span aria-hidden="true">/</span> <span class="mono">{w.workflowId}</span>
      </nav>
      <PageHead
        title={
          <>
            <span class="mono wf-id">{w.workflowId}</span>
            <CopyButton text={w.workflowId} what="the workflow id" /> <StatusBadge status={w.status} testid="wf-status" />
          </>
        }
        sub={
          <>
            <strong>{w.workflowName}</strong> on queue <Link href={paths.queue(ns, w.queueName)}>{w.queueName}</Link>
            {w.appVersion && (
              <>
                , version <code>{w.appVersion}</code>
              </>
            )}
            {wfq.error && <span class="stale"> · refresh failed: {wfq.error.reason || wfq.error.codeName}</span>}
          </>
        }
      >
        <Link href={compareHref} class="btn" data-testid="compare-link">
          Compare with…
        </Link>
        {caps.write && (
          <>
            {mayReceive && (
              <button type="button" class="btn" data-testid="action-send" onClick={() => setDialog("send")}>
                Send message
              </button>
            )}
            <button type="button" class="btn" data-testid="action-fork" onClick={() => setDialog("fork")}>
              Fork
            </button>
            {resumable && (
              <button type="button" class="btn" data-testid="action-resume" onClick={() => setDialog("resume")}>
                Resume
              </button>
            )}
            {!terminal && (
              <button type="button" class="btn danger" data-testid="action-cancel" onClick={() => setDialog("cancel")}>
                Cancel
              </button>
            )}
            {terminal && (
              <button type="button" class="btn danger" data-testid="action-delete" onClick={() => setDialog("delete")}>
                Delete
              </button>
            )}
          </>
        )}
      </PageHead>

      <div class="grid-2">
        <Section title="Overview">
          <Fields>
            <Field label="Status">
              <StatusBadge status={w.status} />
            </Field>
            <Field label="Created">
              <Time ts={w.createdAt} />
            </Field>
            <Field label="First dispatched">
              <Time ts={w.startedAt} />
            </Field>
            <Field label="Updated">
              <Time ts={w.updatedAt} />
            </Field>
            <Field label={terminal ? "Took" : "Running for"}>
              {started !== undefined || created !== undefined ? (
                <Dur ms={(terminal ? updated ?? Date.now() : Date.now()) - (started ?? created ?? 0)} />
              ) : (
                "—"
              )}
            </Field>
            <Field label="Worker">{w.workerId ? <code>{w.workerId}</code> : <span class="muted">—</span>}</Field>
            <Field label="Recovery attempts" title="Times it was taken back from a worker that died">
              <span class={w.recoveryAttempts > 0 ? "warn-text num" : "num"}>{w.recoveryAttempts}</span>
            </Field>
            <Field label="Epoch" title="Raised by every dispatch">
              <span class="num">{String(w.epoch)}</span>
            </Field>
            <Field label="Priority">
              <span class="num">{w.priority}</span>
            </Field>
            {w.partitionKey && (
              <Field label="Partition">
                <code>{w.partitionKey}</code>
              </Field>
            )}
            {w.dedupId && (
              <Field label="Dedup id">
                <code>{w.dedupId}</code>
              </Field>
            )}
            {w.deadline && (
              <Field label="Deadline">
                <Time ts={w.deadline} />
              </Field>
            )}
            {w.wakeAt && (
              <Field label="Wakes">
                <Time ts={w.wakeAt} />
              </Field>
            )}
            {w.run > 0 && (
              <Field label="Run">
                <span class="num">{w.run}</span>
              </Field>
            )}
            {w.traceContext?.traceparent && (
              <Field label="Trace">
                <code class="small">{w.traceContext.traceparent}</code>
              </Field>
            )}
            <Field label="Tags">
              {tags.length ? (
                <span class="tags">
                  {tags.map(([k, v]) => (
                    <Link key={k} href={paths.workflows(ns, new URLSearchParams({ tag: `${k}=${v}` }))} class="tag tone-neutral">
                      {k}={v}
                    </Link>
                  ))}
                </span>
              ) : (
                <span class="muted">none</span>
              )}
            </Field>
          </Fields>
        </Section>
        <div class="stack-gap">
          <Lineage ns={ns} w={w} />
          {(!terminal || w.waitingOn) && <WaitingFor ns={ns} w={w} />}
        </div>
      </div>

      {w.failure && (
        <Section title="Failure">
          <div class="failure" data-testid="wf-failure">
            <code class="reason">{w.failure.kind}</code>
            <CodeBlock text={w.failure.message} />
          </div>
        </Section>
      )}
      <Section title={<>Timeline{stepsq.data ? <span class="count-pill">{plural(steps.length, "step")}</span> : null}</>} id="timeline">
        {stepsq.error && <ErrorBox error={stepsq.error} title="Could not read the steps" />}
        {stepsq.data ? <Timeline w={w} steps={steps} truncated={stepsq.data.truncated} /> : !stepsq.error && <Loading what="Loading the steps" />}
      </Section>

      {stepsq.data && steps.length > 0 && (
        <Section title="Steps">
          <StepsTable w={w} steps={steps} />
        </Section>
      )}

      <div class="grid-2">
        <Section title="Input">
          <CodeBlock text={payloadText(w.input)} testid="wf-input" />
        </Section>
        <Section title="Output">
          {w.status === WorkflowStatus.SUCCESS ? <CodeBlock text={payloadText(w.output)} testid="wf-output" /> : <p class="muted">{terminal ? "No output." : "Not finished yet."}</p>}
        </Section>
      </div>

      <Streams ns={ns} id={id} live={live} />
      <Messages id={id} live={live} />
      <Events id={id} live={live} />
      <Children ns={ns} id={id} live={live} />

      {dialog === "cancel" && <CancelDialog w={w} onClose={() => setDialog(undefined)} onDone={wfq.reload} />}
      {dialog === "resume" && <ResumeDialog w={w} onClose={() => setDialog(undefined)} onDone={wfq.reload} />}
      {dialog === "delete" && <DeleteDialog ns={ns} w={w} onClose={() => setDialog(undefined)} />}
      {dialog === "fork" && <ForkDialog ns={ns} w={w} steps={steps} onClose={() => setDialog(undefined)} />}
      {dialog === "send" && <SendDialog w={w} onClose={() => setDialog(undefined)} onDone={wfq.reload} />}
    </div>
  );
}

function CopyButton({ text, what }: { text: string; what: string }) {
  const [done, setDone] = useState(false);
  return (
    <button
      type="button"
      class="icon-button copy"
      title={done ? "Copied" : `Copy ${what}`}
      aria-label={`Copy ${what}`}
      onClick={async () => {
        setDone(await copyText(text));
        setTimeout(() => setDone(false), 1500);
      }}
    >
      <svg viewBox="0 0 16 16" width="14" height="14" aria-hidden="true">
        {done ? (
          <path d="M3 8.5 6.5 12 13 4.5" fill="none" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" stroke-linejoin="round" />
        ) : (
          <g fill="none" stroke="currentColor" stroke-width="1.4">
            <rect x="5" y="5" width="8.5" height="9" rx="1.5" />
            <path d="M3 11V3.5A1.5 1.5 0 0 1 4.5 2H10" />
          </g>
        )}
      </svg>
    </button>
  );
}

function StepsTable({ w, steps }: { w: Workflow; steps: readonly Step[] }) {
  const rows = spans(w, steps);
  return (
    <div class="table-wrap">
      <table class="table steps">
        <thead>
          <tr>
            <th scope="col" class="num">
              #
            </th>
            <th scope="col">Name</th>
            <th scope="col">Result</th>
            <th scope="col" class="num">
              Attempts
            </th>
            <th scope="col" class="num">
              Epoch
            </th>
            <th scope="col">Recorded</th>
            <th scope="col" class="num" title="From the step's start, where the server knows it, else from the previous checkpoint, to its own checkpoint">
              Took
            </th>
          </tr>
        </thead>
        <tbody>
          {rows.map((r) => (
            <tr key={r.step.stepId} data-testid="step-row" data-step-id={r.step.stepId} class={r.failed ? "row-failed" : ""}>
              <td class="num">{r.step.stepId}</td>
              <td class="mono">{r.step.name}</td>
              <td class="result-cell">
                {r.step.failure ? (
                  <div class="failure">
                    <code class="reason">{r.step.failure.kind}</code> <span>{r.step.failure.message}</span>
                  </div>
                ) : (
                  <CodeBlock text={payloadText(r.step.output)} class="inline" />
                )}
              </td>
              <td class="num">{r.retried ? <Tag tone="warn">{r.step.attempts}</Tag> : r.step.attempts}</td>
              <td class="num">
                {String(r.step.epoch)}
                {r.recovery && (
                  <span class="mark recovery" title="After a recovery">
                    {" "}
                    ⚠
                  </span>
                )}
              </td>
              <td>
                <Time ts={r.step.recordedAt} age={false} />
              </td>
              <td class="num">{tookText(r)}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

function Lineage({ ns, w }: { ns: string; w: Workflow }) {
  const any = w.parentWorkflowId || w.forkedFromWorkflowId || w.continuedAsWorkflowId;
  return (
    <Section title="Lineage" testid="lineage">
      {any ? (
        <Fields>
          {w.parentWorkflowId && (
            <Field label="Parent">
              <Link href={paths.workflow(ns, w.parentWorkflowId)} class="mono" data-testid="parent-link">
                {w.parentWorkflowId}
              </Link>
            </Field>
          )}
          {w.forkedFromWorkflowId && (
            <Field label="Forked from">
              <Link href={paths.workflow(ns, w.forkedFromWorkflowId)} class="mono" data-testid="forked-from">
                {w.forkedFromWorkflowId}
              </Link>{" "}
              at step <span class="num">{w.forkedFromStep}</span>
            </Field>
          )}
          {w.continuedAsWorkflowId && (
            <Field label="Continued as">
              <Link href={paths.workflow(ns, w.continuedAsWorkflowId)} class="mono">
                {w.continuedAsWorkflowId}
              </Link>
            </Field>
          )}
        </Fields>
      ) : (
        <p class="muted">Started directly: no parent, not a fork, not a continued run.</p>
      )}
    </Section>
  );
}

function WaitingFor({ ns, w }: { ns: string; w: Workflow }) {
  const wo = w.waitingOn;
  let what;
  if (!wo || wo.what.case === undefined) {
    what = <p class="muted">Not waiting on anything this replica knows of (or running a step).</p>;
  } else {
    const v = wo.what;
    switch (v.case) {
      case "timer":
        what = <p>A durable sleep.</p>;
        break;
      case "messageTopic":
        what = (
          <p>
            A message on topic <code>{v.value || "(default topic)"}</code>.
          </p>
        );
        break;
      case "event":
        what = (
          <p>
            Event <code>{v.value.key}</code> of workflow{" "}
            <Link href={paths.workflow(ns, v.value.workflowId)} class="mono">
              {v.value.workflowId}
            </Link>
            .
          </p>
        );
        break;
      case "workflowId":
        what = (
          <p>
            Child workflow{" "}
            <Link href={paths.workflow(ns, v.value)} class="mono">
              {v.value}
            </Link>{" "}
            to finish.
          </p>
        );
        break;
      case "remoteStep":
        what = (
          <p>
            Remote step <code>{v.value.stepName}</code> (step {v.value.stepId}){v.value.attempt ? `, attempt ${v.value.attempt}` : ""}.
          </p>
        );
        break;
    }
  }
  return (
    <Section title="Waiting for" testid="waiting-on">
      {what}
      {wo?.until && (
        <p>
          {wo.what.case === "timer" ? "Until " : "Times out "}
          <Time ts={wo.until} />
        </p>
      )}
    </Section>
  );
}

function Messages({ id, live }: { id: string; live: boolean }) {
  const q = useQuery((signal) => clients.workflows.listMessages({ workflowId: id, pageSize: 200 }, { signal }), [id], { refreshMs: live ? REFRESH_MS : 0 });
  const msgs = q.data?.messages ?? [];
  return (
    <Section title={<>Messages{q.data ? <span class="count-pill">{msgs.length}{q.data.nextPageToken ? "+" : ""}</span> : null}</>} testid="messages">
      {q.error && <ErrorBox error={q.error} />}
      {q.data && msgs.length === 0 && <p class="muted">No message was sent to it.</p>}
      {msgs.length > 0 && (
        <div class="table-wrap">
          <table class="table">
            <thead>
              <tr>
                <th>Sent</th>
                <th>Topic</th>
                <th>Payload</th>
                <th>Taken</th>
                <th>Idempotency key</th>
              </tr>
            </thead>
            <tbody>
              {msgs.map((m) => (
                <tr key={m.messageId} data-testid="message-row">
                  <td>
                    <Time ts={m.sentAt} />
                  </td>
                  <td>
                    <code>{m.topic || "(default)"}</code>
                  </td>
                  <td class="result-cell">
                    <CodeBlock text={payloadText(m.payload)} class="inline" />
                  </td>
                  <td>{m.consumed ? <>by step {m.consumedByStep}</> : <Tag tone="info">unread</Tag>}</td>
                  <td class="mono">{m.idempotencyKey || <span class="muted">—</span>}</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {q.data?.nextPageToken && <p class="note">The first 200 messages are shown.</p>}
    </Section>
  );
}

function Events({ id, live }: { id: string; live: boolean }) {
  const q = useQuery((signal) => clients.workflows.listEvents({ workflowId: id, pageSize: 200 }, { signal }), [id], { refreshMs: live ? REFRESH_MS : 0 });
  const events = q.data?.events ?? [];
  return (
    <Section title={<>Events{q.data ? <span class="count-pill">{events.length}</span> : null}</>} testid="events">
      {q.error && <ErrorBox error={q.error} />}
      {q.data && events.length === 0 && <p class="muted">It set no event.</p>}
      {events.map((e) => (
        <div key={e.key} class="event" data-testid="event">
          <div class="event-head">
            <code class="event-key">{e.key}</code> <span class="muted">set <Age ts={e.updatedAt} /></span>
          </div>
          <CodeBlock text={payloadText(e.value)} />
          {e.history.length > 1 && (
            <details>
              <summary>History ({e.history.length} values)</summary>
              <ol class="history">
                {e.history.map((h, i) => (
                  <li key={i}>
                    <span class="muted">
                      step {h.stepId}, <Time ts={h.setAt} />
                    </span>
                    <CodeBlock text={payloadText(h.value)} class="inline" />
                  </li>
                ))}
              </ol>
            </details>
          )}
        </div>
      ))}
    </Section>
  );
}

/**
 * Streams followed at once, at most: each holds one of the browser's few connections to the
 * origin (plain HTTP/1.1 allows six, shared by every tab) and one of the server's waits. A tab
 * that is hidden follows none.
 */
const MAX_FOLLOWED = 3;

function useVisible(): boolean {
  const [visible, setVisible] = useState(!document.hidden);
  useEffect(() => {
    const f = () => setVisible(!document.hidden);
    document.addEventListener("visibilitychange", f);
    return () => document.removeEventListener("visibilitychange", f);
  }, []);
  return visible;
}

function Streams({ ns, id, live }: { ns: string; id: string; live: boolean }) {
  const q = useQuery((signal) => clients.workflows.listStreams({ workflowId: id }, { signal }), [ns, id], { refreshMs: live ? REFRESH_MS : 0 });
  const streams = q.data?.streams ?? [];
  return (
    <Section title={<>Streams{q.data ? <span class="count-pill">{streams.length}</span> : null}</>} testid="streams">
      {q.error && <ErrorBox error={q.error} />}
      {q.data && streams.length === 0 && <p class="muted">It wrote no stream{live ? " yet" : ""}.</p>}
      {streams.map((s, i) => (
        <StreamView key={s.key} id={id} streamKey={s.key} length={Number(s.length)} closed={s.closed} autoFollow={i < MAX_FOLLOWED} />
      ))}
    </Section>
  );
}

/** Follows one stream from offset 0 with ReadStream, values appearing as they are written. */
function StreamView({ id, streamKey, length, closed, autoFollow }: { id: string; streamKey: string; length: number; closed: boolean; autoFollow: boolean }) {
  const [follow, setFollow] = useState(autoFollow);
  const [values, setValues] = useState<{ offset: bigint; text: string }[]>([]);
  const [state, setState] = useState<"following" | "ended" | "stopped" | "error">("stopped");
  const [error, setError] = useState<unknown>();
  const [attempt, setAttempt] = useState(0);
  const visible = useVisible();
  const next = useRef(0n);
  const ended = useRef(false);
  useEffect(() => {
    if (ended.current) return;
    if (!follow || !visible) {
      if (follow) setState("stopped");
      return;
    }
    const ac = new AbortController();
    setState("following");
    setError(undefined);
    (async () => {
      try {
        for await (const r of clients.workflows.readStream({ workflowId: id, key: streamKey, fromOffset: next.current }, { signal: ac.signal })) {
          next.current = r.offset + 1n;
          const text = payloadText(r.value);
          setValues((vs) => [...vs, { offset: r.offset, text }]);
        }
        if (!ac.signal.aborted) {
          ended.current = true;
          setState("ended");
        }
      } catch (e) {
        if (ac.signal.aborted) return;
        setError(e);
        setState("error");
      }
    })();
    // Leaving the page (or the stream) ends the call.
    return () => ac.abort();
  }, [id, streamKey, follow, attempt, visible]);
  return (
    <div class="stream" data-testid="stream" data-stream-key={streamKey}>
      <div class="stream-head">
        <code class="event-key">{streamKey}</code>
        <span class="muted">
          {plural(Math.max(length, values.length), "value")}
          {closed ? ", closed" : ""}
        </span>
        {state === "following" && (
          <span class="live" title="Values appear as they are written">
            <span class="dot" aria-hidden="true" /> live
          </span>
        )}
        {state === "ended" && <span class="muted">· ended</span>}
        {!follow && (
          <button type="button" class="btn small" onClick={() => setFollow(true)}>
            Follow
          </button>
        )}
        {state === "error" && (
          <button type="button" class="btn small" onClick={() => setAttempt((a) => a + 1)}>
            Retry
          </button>
        )}
      </div>
      {error !== undefined && <ErrorBox error={error} title="Reading the stream failed" />}
      <ol class="stream-values" start={0}>
        {values.map((v) => (
          <li key={String(v.offset)} data-testid="stream-value" data-offset={String(v.offset)}>
            <span class="offset num">{String(v.offset)}</span>
            <CodeBlock text={v.text} class="inline" />
          </li>
        ))}
      </ol>
      {follow && values.length === 0 && state === "following" && <p class="muted small">Waiting for a value…</p>}
    </div>
  );
}

function Children({ ns, id, live }: { ns: string; id: string; live: boolean }) {
  return (
    <Section title="Children" testid="children">
      <ChildList ns={ns} parent={id} live={live} depth={0} />
    </Section>
  );
}

function ChildList({ ns, parent, live, depth }: { ns: string; parent: string; live: boolean; depth: number }) {
  const q = useQuery((signal) => clients.workflows.listWorkflows({ parentWorkflowId: parent, pageSize: 100 }, { signal }), [ns, parent], {
    refreshMs: live && depth === 0 ? REFRESH_MS * 2 : 0,
  });
  if (q.error) return <ErrorBox error={q.error} />;
  if (!q.data) return <Loading what="Loading children" />;
  const kids = q.data.workflows;
  if (kids.length === 0) return depth === 0 ? <p class="muted">It started no child workflow.</p> : <p class="muted small">No children.</p>;
  return (
    <ul class={depth === 0 ? "tree" : "tree nested"}>
      {kids.map((c) => (
        <ChildNode key={c.workflowId} ns={ns} w={c} depth={depth} />
      ))}
      {q.data.nextPageToken && (
        <li class="muted small">
          More children:{" "}
          <Link href={paths.workflows(ns, new URLSearchParams({ parent }))}>list them all</Link>
        </li>
      )}
    </ul>
  );
}

function ChildNode({ ns, w, depth }: { ns: string; w: Workflow; depth: number }) {
  const [open, setOpen] = useState(false);
  return (
    <li data-testid="child" data-workflow-id={w.workflowId}>
      <div class="tree-row">
        <button type="button" class="tree-toggle" aria-expanded={open} aria-label={open ? "Hide its children" : "Show its children"} onClick={() => setOpen(!open)}>
          {open ? "▾" : "▸"}
        </button>
        <Link href={paths.workflow(ns, w.workflowId)} class="mono">
          {w.workflowId}
        </Link>
        <span>{w.workflowName}</span>
        <StatusBadge status={w.status} />
      </div>
      {open && <ChildList ns={ns} parent={w.workflowId} live={false} depth={depth + 1} />}
    </li>
  );
}

// Actions. Each dialog shows the API's refusal (code, reason, message) and stays open.

function CancelDialog({ w, onClose, onDone }: { w: Workflow; onClose: () => void; onDone: () => void }) {
  const [cascade, setCascade] = useState(true);
  return (
    <Dialog
      title="Cancel the workflow"
      danger
      confirmLabel="Cancel workflow"
      onClose={onClose}
      onConfirm={async () => {
        await clients.workflows.cancelWorkflow({ workflowId: w.workflowId, cascade });
        onDone();
        onClose();
      }}
    >
      <p>
        Cancel <code>{w.workflowId}</code>? It stops at its next step boundary; Resume puts it back in its queue later.
      </p>
      <label class="check">
        <input type="checkbox" checked={cascade} onChange={(e) => setCascade((e.target as HTMLInputElement).checked)} data-testid="cancel-cascade" />
        Also cancel its child workflows, and theirs
      </label>
    </Dialog>
  );
}

function ResumeDialog({ w, onClose, onDone }: { w: Workflow; onClose: () => void; onDone: () => void }) {
  return (
    <Dialog
      title="Resume the workflow"
      confirmLabel="Resume"
      onClose={onClose}
      onConfirm={async () => {
        await clients.workflows.resumeWorkflow({ workflowId: w.workflowId });
        onDone();
        onClose();
      }}
    >
      <p>
        Put <code>{w.workflowId}</code> ({statusName(w.status)}) back in its queue? It replays from its checkpoints
        {w.status === WorkflowStatus.ERROR ? "; its failure is dropped, and a failed last step runs again on the code its workers run now" : ""}.
      </p>
    </Dialog>
  );
}

function DeleteDialog({ ns, w, onClose }: { ns: string; w: Workflow; onClose: () => void }) {
  const [cascade, setCascade] = useState(false);
  return (
    <Dialog
      title="Delete the workflow"
      danger
      confirmLabel="Delete"
      onClose={onClose}
      onConfirm={async () => {
        await clients.workflows.deleteWorkflow({ workflowId: w.workflowId, cascade });
        onClose();
        navigate(paths.workflows(ns));
      }}
    >
      <p>
        Delete <code>{w.workflowId}</code> and everything recorded for it (steps, messages, events, streams)? This cannot be undone.
      </p>
      <label class="check">
        <input type="checkbox" checked={cascade} onChange={(e) => setCascade((e.target as HTMLInputElement).checked)} data-testid="delete-cascade" />
        Also delete its child workflows, and theirs
      </label>
    </Dialog>
  );
}

function ForkDialog({ ns, w, steps, onClose }: { ns: string; w: Workflow; steps: readonly Step[]; onClose: () => void }) {
  // Default: from the first failed step, else from the last one (rerun it).
  const failed = steps.find((s) => s.failure);
  const [from, setFrom] = useState<string>(failed ? String(failed.stepId) : steps.length ? String(steps[steps.length - 1]!.stepId) : "all");
  const [newId, setNewId] = useState("");
  const [version, setVersion] = useState("");
  return (
    <Dialog
      title="Fork the workflow"
      confirmLabel="Fork"
      wide
      onClose={onClose}
      onConfirm={async () => {
        const r = await clients.workflows.forkWorkflow({
          workflowId: w.workflowId,
          fromStep: from === "all" ? undefined : Number(from),
          newWorkflowId: newId.trim(),
          appVersion: version.trim(),
        });
        onClose();
        if (r.workflow) navigate(paths.workflow(ns, r.workflow.workflowId));
      }}
    >
      <p>
        A new workflow with the same name and input: the steps before the chosen one are copied and replay, the rest run again.
      </p>
      <label class="stack">
        <span>Run on from</span>
        <select value={from} onChange={(e) => setFrom((e.target as HTMLSelectElement).value)} data-testid="fork-step">
          {steps.map((s) => (
            <option key={s.stepId} value={String(s.stepId)}>
              step {s.stepId}: {s.name}
              {s.failure ? " (failed)" : ""} — copies {plural(s.stepId, "step")}
            </option>
          ))}
          <option value="all">after the last recorded step — copies all {steps.length}</option>
        </select>
      </label>
      <label class="stack">
        <span>New workflow id (optional)</span>
        <input value={newId} onInput={(e) => setNewId((e.target as HTMLInputElement).value)} placeholder="generated when empty" data-testid="fork-id" spellcheck={false} />
      </label>
      <label class="stack">
        <span>App version (optional)</span>
        <input value={version} onInput={(e) => setVersion((e.target as HTMLInputElement).value)} placeholder={w.appVersion ? `the source's: ${w.appVersion}` : "the source's"} data-testid="fork-version" spellcheck={false} />
      </label>
    </Dialog>
  );
}

function SendDialog({ w, onClose, onDone }: { w: Workflow; onClose: () => void; onDone: () => void }) {
  const [topic, setTopic] = useState("");
  const [text, setText] = useState("{}");
  const [key, setKey] = useState("");
  let parsed: JsonValue | undefined;
  let parseError = "";
  try {
    parsed = JSON.parse(text) as JsonValue;
  } catch (e) {
    parseError = (e as Error).message;
  }
  const [sent, setSent] = useState<{ id: string; duplicate: boolean } | undefined>();
  return (
    <Dialog
      title="Send a message"
      confirmLabel="Send"
      wide
      confirmDisabled={parsed === undefined}
      onClose={onClose}
      onConfirm={
        sent
          ? undefined
          : async () => {
              const r = await clients.workflows.sendMessage({
                workflowId: w.workflowId,
                topic: topic.trim(),
                message: create(PayloadSchema, { content: { case: "json", value: fromJson(ValueSchema, parsed ?? null) } }),
                idempotencyKey: key.trim(),
              });
              setSent({ id: r.messageId, duplicate: r.duplicate });
              onDone();
            }
      }
    >
      {sent ? (
        <p data-testid="sent">
          {sent.duplicate ? "Already sent with this idempotency key: " : "Sent: "}message <code>{sent.id}</code>.
        </p>
      ) : (
        <>
          <label class="stack">
            <span>Topic</span>
            <input value={topic} onInput={(e) => setTopic((e.target as HTMLInputElement).value)} placeholder="(default topic)" data-testid="send-topic" spellcheck={false} />
          </label>
          <label class="stack">
            <span>Payload (JSON)</span>
            <textarea rows={6} value={text} onInput={(e) => setText((e.target as HTMLTextAreaElement).value)} data-testid="send-payload" spellcheck={false} class="mono" aria-invalid={parseError !== ""} />
          </label>
          {parseError && <p class="note error-text">Not JSON: {parseError}</p>}
          <label class="stack">
            <span>Idempotency key (optional)</span>
            <input value={key} onInput={(e) => setKey((e.target as HTMLInputElement).value)} placeholder="a retried send with it is delivered once" data-testid="send-key" spellcheck={false} />
          </label>
        </>
      )}
    </Dialog>
  );
}

