// The step timeline: a Gantt chart, one row per recorded step. A step's bar ends at its
// checkpoint and starts when the step began, where the server knows it (Step.started_at: a
// worker that reports its steps' durations, a remote step's first dispatch); elsewhere it starts
// at the previous step's checkpoint (the first: the workflow's first dispatch, else its
// creation), and reads "since the previous checkpoint".

import { useState } from "preact/hooks";
import type { Step, Workflow } from "../gen/waymark/v1/types_pb.js";
import { humanDuration, isoTime, localTime, TERMINAL, tsMs } from "../format.js";

export interface StepSpan {
  step: Step;
  start: number;
  end: number;
  /** Its epoch differs from the previous step's: it ran after the workflow was taken back. */
  recovery: boolean;
  /** Copied from the source of a fork (recorded there, not run here): drawn at the start. */
  copied: boolean;
  /** The first step a fork ran itself (the ones before were copied). */
  forkPoint: boolean;
  /** The start is the step's own (Step.started_at), not the previous checkpoint. */
  measured: boolean;
  retried: boolean;
  failed: boolean;
}

export function spans(w: Workflow, steps: readonly Step[]): StepSpan[] {
  const t0 = tsMs(w.startedAt) ?? tsMs(w.createdAt) ?? 0;
  const fork = w.forkedFromWorkflowId !== "";
  const out: StepSpan[] = [];
  let prevEnd = t0;
  steps.forEach((s, i) => {
    const copied = fork && s.stepId < w.forkedFromStep;
    const recorded = tsMs(s.recordedAt) ?? prevEnd;
    // A copied step keeps the source's record: it took no time here.
    const end = copied ? t0 : Math.max(recorded, fork ? t0 : recorded);
    const own = copied ? undefined : tsMs(s.startedAt);
    const measured = own !== undefined && own <= end;
    const start = measured ? Math.max(own, fork ? t0 : own) : Math.min(prevEnd, end);
    const prev = steps[i - 1];
    const forkPoint = fork && s.stepId === w.forkedFromStep && i > 0;
    out.push({
      step: s,
      start,
      end,
      recovery: prev !== undefined && prev.epoch !== s.epoch && !forkPoint && !copied,
      copied,
      forkPoint,
      measured,
      retried: s.attempts > 1,
      failed: s.failure !== undefined,
    });
    prevEnd = end;
  });
  return out;
}

/** How long a step took since the previous checkpoint, or "copied". */
export function tookText(s: StepSpan): string {
  return s.copied ? "copied" : humanDuration(s.end - s.start);
}

function Marks({ s }: { s: StepSpan }) {
  return (
    <span class="marks">
      {s.failed && (
        <span class="mark failed" title={`${s.step.failure?.kind}: ${s.step.failure?.message}`}>
          <svg viewBox="0 0 10 10" width="10" height="10" aria-hidden="true">
            <path d="M2.5 2.5 7.5 7.5M7.5 2.5 2.5 7.5" stroke="currentColor" stroke-width="1.8" stroke-linecap="round" />
          </svg>
          failed
        </span>
      )}
      {s.retried && (
        <span class="mark retried" title="The step was retried">
          <svg viewBox="0 0 10 10" width="10" height="10" aria-hidden="true">
            <path d="M8 5a3 3 0 1 1-1-2.2M7.6 1.2v1.9H5.7" fill="none" stroke="currentColor" stroke-width="1.4" stroke-linecap="round" />
          </svg>
          {s.step.attempts} attempts
        </span>
      )}
      {s.recovery && (
        <span class="mark recovery" title="Recorded under a new epoch: the workflow was taken back from a worker that died (or was let go) and ran on elsewhere">
          <svg viewBox="0 0 10 10" width="10" height="10" aria-hidden="true">
            <path d="M5 1.2 9 8.6H1Z" fill="currentColor" />
          </svg>
          recovery (epoch {String(s.step.epoch)})
        </span>
      )}
      {s.copied && (
        <span class="mark copied" title="Copied from the workflow this one was forked from: recorded there, replayed here">
          copied
        </span>
      )}
      {s.forkPoint && (
        <span class="mark fork" title="A fork: the steps before this one were copied from its source">
          <svg viewBox="0 0 10 10" width="10" height="10" aria-hidden="true">
            <path d="M2 1v8M2 5q0-2 3-2h3" fill="none" stroke="currentColor" stroke-width="1.4" />
          </svg>
          fork runs on from here
        </span>
      )}
    </span>
  );
}

export function Timeline({ w, steps, truncated }: { w: Workflow; steps: readonly Step[]; truncated: boolean }) {
  const rows = spans(w, steps);
  const [active, setActive] = useState<number | undefined>();
  const terminal = TERMINAL.has(w.status);
  const t0 = Math.min(tsMs(w.startedAt) ?? tsMs(w.createdAt) ?? 0, ...rows.map((r) => r.start));
  const lastEnd = rows.length ? rows[rows.length - 1]!.end : t0;
  const tEnd = Math.max(lastEnd, terminal ? tsMs(w.updatedAt) ?? lastEnd : Date.now(), t0 + 1);
  const total = tEnd - t0;
  const pct = (t: number) => ((t - t0) / total) * 100;
  const shown = active !== undefined ? rows[active] : undefined;
  const ticks = [0, 0.25, 0.5, 0.75, 1];

  return (
    <div class="timeline" data-testid="timeline">
      <p class="muted small legend">
        Each bar ends at the step's checkpoint. It starts when the step began where the server knows it; elsewhere (marked ◦) its start is{" "}
        <em>since the previous checkpoint</em> (the first step's: since the workflow's first dispatch), not when its code began. Total{" "}
        {humanDuration(total)}
        {terminal ? "" : " so far"}.
        <span class="legend-keys">
          <span class="key ok">step</span>
          <span class="key failed">failed</span>
          <span class="key retried">retried</span>
          <span class="key recovery">after a recovery</span>
          {w.forkedFromWorkflowId && <span class="key copied">copied from the fork's source</span>}
        </span>
      </p>
      {rows.length === 0 ? (
        <p class="empty">No step recorded yet.</p>
      ) : (
        <div class="gantt" role="list" aria-label="Steps over time">
          <div class="gantt-row gantt-axis" aria-hidden="true">
            <div class="gantt-label" />
            <svg class="gantt-bar" width="100%" height="16">
              {ticks.map((f) => (
                <text key={f} x={`${f * 100}%`} y="12" class={f === 1 ? "tick end" : f === 0 ? "tick start" : "tick"}>
                  {f === 0 ? localTime(t0) : `+${humanDuration(total * f)}`}
                </text>
              ))}
            </svg>
          </div>
          {rows.map((r, i) => {
            const x = pct(r.start);
            const width = Math.max(pct(r.end) - x, 0.25);
            const dur = r.end - r.start;
            const cls = r.failed ? "failed" : r.copied ? "copied" : r.recovery ? "recovery" : r.retried ? "retried" : "ok";
            const summary = `Step ${r.step.stepId} ${r.step.name}: ${r.copied ? "copied from the fork's source" : `${humanDuration(dur)}${r.measured ? "" : " since the previous checkpoint"}`}, ${r.step.attempts} attempt${r.step.attempts === 1 ? "" : "s"}${r.failed ? ", failed" : ""}${r.recovery ? ", after a recovery" : ""}`;
            return (
              <div
                key={r.step.stepId}
                class={`gantt-row ${active === i ? "active" : ""}`}
                role="listitem"
                tabIndex={0}
                aria-label={summary}
                data-testid="timeline-step"
                data-step-id={r.step.stepId}
                onMouseEnter={() => setActive(i)}
                onFocus={() => setActive(i)}
              >
                <div class="gantt-label">
                  <span class="step-no num">{r.step.stepId}</span>
                  {!r.measured && !r.copied && (
                    <span class="since" title="Its start is the previous checkpoint: the server does not know when the step began">
                      ◦
                    </span>
                  )}
                  <span class="step-name" title={r.step.name}>
                    {r.step.name}
                  </span>
                  <Marks s={r} />
                </div>
                <svg class="gantt-bar" width="100%" height="18">
                  <rect class="lane" x="0" y="8" width="100%" height="2" />
                  <rect class={`bar ${cls}`} x={`${x}%`} width={`${width}%`} y="3" height="12" rx="2">
                    <title>{summary}</title>
                  </rect>
                </svg>
              </div>
            );
          })}
          {!terminal && (
            <div class="gantt-row now" aria-label="Since the last checkpoint">
              <div class="gantt-label muted">now: {humanDuration(Date.now() - lastEnd)} since the last checkpoint</div>
              <svg class="gantt-bar" width="100%" height="18">
                <rect class="bar open" x={`${pct(lastEnd)}%`} width={`${Math.max(100 - pct(lastEnd), 0.25)}%`} y="5" height="8" rx="2" />
              </svg>
            </div>
          )}
        </div>
      )}
      {truncated && <p class="note">Only the first 2,000 steps are shown.</p>}
      <div class="inspector" aria-live="polite" data-testid="timeline-detail">
        {shown ? (
          <>
            <strong>
              Step {shown.step.stepId}: {shown.step.name}
            </strong>
            <span>
              {shown.measured ? "began" : "since"} <time title={isoTime(shown.start)}>{localTime(shown.start)}</time>
              {shown.measured ? "" : " (previous checkpoint)"}
            </span>
            <span>
              recorded <time title={isoTime(shown.end)}>{localTime(shown.end)}</time>
            </span>
            <span>took {tookText(shown)}</span>
            <span>
              {shown.step.attempts} attempt{shown.step.attempts === 1 ? "" : "s"}
            </span>
            <span>epoch {String(shown.step.epoch)}</span>
            <Marks s={shown} />
          </>
        ) : (
          <span class="muted">Point at or focus a step for its details.</span>
        )}
      </div>
    </div>
  );
}
