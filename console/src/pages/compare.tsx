// Two runs side by side, step by step (a fork and its source, a rerun and the run that failed):
// rows by step id, differences marked, and the first step where they part called out.

import { useEffect, useState } from "preact/hooks";
import { clients } from "../api.js";
import { Code as CodeBlock, Empty, ErrorBox, Link, Loading, PageHead, StatusBadge, Tag } from "../components.js";
import type { Step, Workflow } from "../gen/waymark/v1/types_pb.js";
import { payloadKey, payloadText, plural } from "../format.js";
import { useDebounced, useQuery, useTitle } from "../hooks.js";
import { paths, setQuery, useLocation } from "../router.js";
import { allSteps, STEP_CAP } from "./workflow.js";
import { spans, tookText, type StepSpan } from "./timeline.js";

interface Run {
  w: Workflow;
  steps: Step[];
  truncated: boolean;
}

async function loadRun(id: string, signal: AbortSignal): Promise<Run | undefined> {
  if (!id) return undefined;
  const [wr, st] = await Promise.all([clients.workflows.getWorkflow({ workflowId: id }, { signal }), allSteps(id, signal)]);
  if (!wr.workflow) return undefined;
  return { w: wr.workflow, steps: st.steps, truncated: st.truncated };
}

const resultKey = (s: Step) => (s.failure ? `failure:${s.failure.kind}:${s.failure.message}` : `output:${payloadKey(s.output)}`);

export function ComparePage({ ns }: { ns: string }) {
  useTitle("Compare");
  const loc = useLocation();
  const q = new URLSearchParams(loc.search);
  const [a, setA] = useState(q.get("a") ?? "");
  const [b, setB] = useState(q.get("b") ?? "");
  const da = useDebounced(a.trim(), 400);
  const db = useDebounced(b.trim(), 400);
  useEffect(() => {
    const p = new URLSearchParams();
    if (da) p.set("a", da);
    if (db) p.set("b", db);
    setQuery(p);
  }, [da, db]);
  const ra = useQuery((signal) => loadRun(da, signal), [ns, da]);
  const rb = useQuery((signal) => loadRun(db, signal), [ns, db]);

  return (
    <div class="page">
      <PageHead title="Compare two runs" sub="Step by step, by position: name, result, attempts and time. Durations always differ and are not counted." />
      <form class="filters compare-inputs" onSubmit={(e) => e.preventDefault()}>
        <label>
          <span>Run A</span>
          <input data-filter value={a} onInput={(e) => setA((e.target as HTMLInputElement).value)} placeholder="workflow id" data-testid="compare-a" spellcheck={false} />
        </label>
        <button type="button" class="btn" title="Swap" aria-label="Swap A and B" onClick={() => (setA(b), setB(a))}>
          ⇄
        </button>
        <label>
          <span>Run B</span>
          <input value={b} onInput={(e) => setB((e.target as HTMLInputElement).value)} placeholder="workflow id" data-testid="compare-b" spellcheck={false} />
        </label>
      </form>
      {ra.error && <ErrorBox error={ra.error} title={`Run A (${da})`} />}
      {rb.error && <ErrorBox error={rb.error} title={`Run B (${db})`} />}
      {!da || !db ? (
        <Empty>Name two workflows to compare (a fork's page links here with its source filled in).</Empty>
      ) : ra.data && rb.data ? (
        <Comparison ns={ns} a={ra.data} b={rb.data} />
      ) : ra.error || rb.error ? null : (
        <Loading what="Loading both runs" />
      )}
    </div>
  );
}

interface Row {
  stepId: number;
  a?: StepSpan;
  b?: StepSpan;
  differs: boolean;
  what: string[];
}

function rowsOf(a: Run, b: Run): Row[] {
  const sa = new Map(spans(a.w, a.steps).map((s) => [s.step.stepId, s]));
  const sb = new Map(spans(b.w, b.steps).map((s) => [s.step.stepId, s]));
  const ids = [...new Set([...sa.keys(), ...sb.keys()])].sort((x, y) => x - y);
  return ids.map((stepId) => {
    const x = sa.get(stepId);
    const y = sb.get(stepId);
    const what: string[] = [];
    if (!x) what.push("missing in A");
    else if (!y) what.push("missing in B");
    else {
      if (x.step.name !== y.step.name) what.push("name");
      if (resultKey(x.step) !== resultKey(y.step)) what.push(x.step.failure || y.step.failure ? "result" : "output");
      if (x.step.attempts !== y.step.attempts) what.push("attempts");
    }
    // Attempts alone do not make runs part ways: the same result after more tries.
    const differs = what.some((w) => w !== "attempts");
    return { stepId, a: x, b: y, differs, what };
  });
}

/** "the output differs", "it is missing in B", "the name and result differ". */
function partText(r: Row): string {
  const what = r.what.filter((w) => w !== "attempts");
  if (what.length === 1 && what[0]!.startsWith("missing")) return `it is ${what[0]}`;
  return `the ${what.join(" and ")} ${what.length === 1 ? "differs" : "differ"}`;
}

function Side({ s }: { s: StepSpan | undefined }) {
  if (!s) return <td colSpan={3} class="missing">missing</td>;
  return (
    <>
      <td class="mono">{s.step.name}</td>
      <td class="result-cell">
        {s.step.failure ? (
          <span class="failure">
            <code class="reason">{s.step.failure.kind}</code> {s.step.failure.message}
          </span>
        ) : (
          <CodeBlock text={payloadText(s.step.output)} class="inline" />
        )}
      </td>
      <td class="num nowrap">
        {s.step.attempts > 1 ? <Tag tone="warn">{s.step.attempts}×</Tag> : "1×"} {tookText(s)}
      </td>
    </>
  );
}

function Comparison({ ns, a, b }: { ns: string; a: Run; b: Run }) {
  const rows = rowsOf(a, b);
  const first = rows.find((r) => r.differs);
  const outcomeSame = a.w.status === b.w.status && payloadKey(a.w.output) === payloadKey(b.w.output);
  return (
    <>
      <div class="compare-heads">
        {[a, b].map((r, i) => (
          <div class="card compare-head" key={i}>
            <div class="muted small">Run {i === 0 ? "A" : "B"}</div>
            <Link href={paths.workflow(ns, r.w.workflowId)} class="mono">
              {r.w.workflowId}
            </Link>{" "}
            <StatusBadge status={r.w.status} />
            <div class="muted small">
              {r.w.workflowName}, {r.steps.length} steps{r.w.appVersion ? `, version ${r.w.appVersion}` : ""}
              {r.w.forkedFromWorkflowId ? `, forked from ${r.w.forkedFromWorkflowId} at step ${r.w.forkedFromStep}` : ""}
            </div>
          </div>
        ))}
      </div>
      <div class={`callout ${first ? "warn" : "ok"}`} data-testid="diverged-at" data-step-id={first?.stepId}>
        {first ? (
          <>
            The runs part at <strong>step {first.stepId}</strong>
            {first.a || first.b ? (
              <>
                {" "}
                (<code>{(first.a ?? first.b)!.step.name}</code>)
              </>
            ) : null}
            : {partText(first)}. {rows.filter((r) => r.differs).length} of {plural(rows.length, "step")} differ.
          </>
        ) : (
          <>The runs agree on every step{outcomeSame ? " and on their outcome" : ", though their outcomes differ"}.</>
        )}
      </div>
      {(a.truncated || b.truncated) && <p class="note">Only the first {STEP_CAP.toLocaleString()} steps of a run are compared.</p>}
      <div class="table-wrap">
        <table class="table compare">
          <thead>
            <tr>
              <th rowSpan={2} class="num">
                #
              </th>
              <th colSpan={3} class="side-head">
                A
              </th>
              <th colSpan={3} class="side-head">
                B
              </th>
              <th rowSpan={2}>Verdict</th>
            </tr>
            <tr>
              <th>Name</th>
              <th>Result</th>
              <th class="num">Tries, took</th>
              <th>Name</th>
              <th>Result</th>
              <th class="num">Tries, took</th>
            </tr>
          </thead>
          <tbody>
            {rows.map((r) => (
              <tr key={r.stepId} data-testid="compare-row" data-step-id={r.stepId} data-differs={r.differs ? "true" : "false"} class={r.differs ? "differs" : ""}>
                <td class="num">{r.stepId}</td>
                <Side s={r.a} />
                <Side s={r.b} />
                <td>
                  {r.differs ? (
                    <Tag tone="warn">differs: {r.what.join(", ")}</Tag>
                  ) : r.what.length ? (
                    <Tag tone="info">same result, {r.what.join(", ")} differ</Tag>
                  ) : (
                    <span class="muted">same</span>
                  )}
                </td>
              </tr>
            ))}
          </tbody>
        </table>
      </div>
    </>
  );
}
