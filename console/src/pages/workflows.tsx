// The workflow list: filters kept in the URL, pages by token (never by offset), live refresh of
// the first page, a count asked for only on request, and bulk actions on everything matching.

import { useEffect, useMemo, useRef, useState } from "preact/hooks";
import { create } from "@bufbuild/protobuf";
import { timestampFromMs } from "@bufbuild/protobuf/wkt";
import { clients, describeError, type ApiErrorInfo } from "../api.js";
import { Age, Dialog, Dur, Empty, ErrorBox, Link, Loading, PageHead, StatusBadge, Time } from "../components.js";
import { BulkCancelSchema, BulkDeleteSchema, BulkResumeSchema, WorkflowFilterSchema, type BulkWorkflowsRequest, type WorkflowFilter } from "../gen/waymark/v1/workflow_pb.js";
import type { Workflow } from "../gen/waymark/v1/types_pb.js";
import { fromLocalInput, parseStatus, plural, STATUSES, statusName, TERMINAL, toLocalInput, tsMs } from "../format.js";
import { useDebounced, useQuery, useTitle } from "../hooks.js";
import { isPlainClick, navigate, paths, setQuery, useLocation } from "../router.js";
import { useCaps } from "../session.js";

const PAGE_SIZE = 50;
const REFRESH_MS = 2000;

/** The filters as the URL holds them. */
interface Filters {
  status: string;
  name: string;
  queue: string;
  tag: string;
  from: string;
  to: string;
  version: string;
  parent: string;
  prefix: string;
  worker: string;
}

const FILTER_KEYS: (keyof Filters)[] = ["status", "name", "queue", "prefix", "tag", "parent", "version", "worker", "from", "to"];

function filtersFrom(search: string): Filters {
  const q = new URLSearchParams(search);
  return {
    status: parseStatus(q.get("status")) ? (q.get("status") ?? "").toUpperCase() : "",
    name: q.get("name") ?? "",
    queue: q.get("queue") ?? "",
    tag: q.getAll("tag").join(", "),
    from: q.get("from") ?? "",
    to: q.get("to") ?? "",
    version: q.get("version") ?? "",
    parent: q.get("parent") ?? "",
    prefix: q.get("prefix") ?? "",
    worker: q.get("worker") ?? "",
  };
}

function queryOf(f: Filters): URLSearchParams {
  const q = new URLSearchParams();
  for (const k of FILTER_KEYS) {
    const v = f[k].trim();
    if (!v) continue;
    if (k === "tag") for (const t of parseTags(v).pairs) q.append("tag", `${t[0]}=${t[1]}`);
    else q.set(k, v);
  }
  return q;
}

/** "team=payments, job=nightly" as pairs; what is not k=v is reported. */
function parseTags(text: string): { pairs: [string, string][]; bad: string[] } {
  const pairs: [string, string][] = [];
  const bad: string[] = [];
  for (const part of text.split(",").map((s) => s.trim()).filter(Boolean)) {
    const i = part.indexOf("=");
    if (i <= 0) bad.push(part);
    else pairs.push([part.slice(0, i).trim(), part.slice(i + 1).trim()]);
  }
  return { pairs, bad };
}

/** The API's filter (ListWorkflowsRequest and WorkflowFilter share these fields). */
export type FilterFields = Omit<WorkflowFilter, "$typeName" | "$unknown">;

export function apiFilter(f: Filters): FilterFields {
  const status = parseStatus(f.status);
  const from = Date.parse(f.from);
  const to = Date.parse(f.to);
  return {
    statuses: status ? [status] : [],
    workflowName: f.name.trim(),
    queueName: f.queue.trim(),
    createdAfter: Number.isNaN(from) ? undefined : timestampFromMs(from),
    createdBefore: Number.isNaN(to) ? undefined : timestampFromMs(to),
    appVersion: f.version.trim(),
    parentWorkflowId: f.parent.trim(),
    tags: Object.fromEntries(parseTags(f.tag).pairs),
    workflowIdPrefix: f.prefix.trim(),
    workerId: f.worker.trim(),
  };
}

let listPaintedMarked = false;

export function WorkflowList({ ns }: { ns: string }) {
  useTitle(`Workflows · ${ns}`);
  const caps = useCaps();
  const loc = useLocation();
  const urlFilters = useMemo(() => filtersFrom(loc.search), [loc.search]);
  // What the inputs show; written to the URL once typing pauses.
  const [inputs, setInputs] = useState<Filters>(urlFilters);
  const written = useRef(loc.search);
  useEffect(() => {
    if (loc.search !== written.current) {
      written.current = loc.search;
      setInputs(filtersFrom(loc.search));
    }
  }, [loc.search]);
  const debounced = useDebounced(inputs, 300);
  useEffect(() => {
    const q = queryOf(debounced);
    const s = String(q);
    if (s !== new URLSearchParams(location.search).toString()) {
      written.current = s ? `?${s}` : "";
      setQuery(q);
    }
  }, [debounced]);

  const filter = useMemo(() => apiFilter(urlFilters), [urlFilters]);
  const filterKey = String(queryOf(urlFilters));
  // The page tokens walked through (a stack: Previous pops), for these filters only.
  const pagerKey = `${ns}?${filterKey}`;
  const [pager, setPager] = useState<{ key: string; tokens: string[] }>({ key: pagerKey, tokens: [""] });
  const tokens = pager.key === pagerKey ? pager.tokens : [""];
  const setTokens = (t: string[]) => setPager({ key: pagerKey, tokens: t });
  const pageToken = tokens[tokens.length - 1] ?? "";
  const onFirstPage = tokens.length === 1;

  const list = useQuery(
    (signal) => clients.workflows.listWorkflows({ ...filter, pageSize: PAGE_SIZE, pageToken }, { signal }),
    [ns, filterKey, pageToken],
    { refreshMs: onFirstPage ? REFRESH_MS : 0 },
  );
  const rows = list.data?.workflows ?? [];

  const [count, setCount] = useState<{ key: string; total?: bigint; busy: boolean; error?: ApiErrorInfo }>({ key: "", busy: false });
  const countMatching = async () => {
    const key = `${ns}?${filterKey}`;
    setCount({ key, busy: true });
    try {
      const r = await clients.workflows.listWorkflows({ ...filter, pageSize: 1, includeTotal: true });
      setCount({ key, total: r.total ?? 0n, busy: false });
    } catch (e) {
      setCount({ key, busy: false, error: describeError(e) });
    }
  };
  const countShown = count.key === `${ns}?${filterKey}` ? count : undefined;

  const [selected, setSelected] = useState(-1);
  useEffect(() => setSelected(-1), [filterKey, pageToken]);
  const rowsRef = useRef<Workflow[]>(rows);
  rowsRef.current = rows;
  useEffect(() => {
    const onKey = (e: KeyboardEvent) => {
      const t = e.target as HTMLElement | null;
      if (e.metaKey || e.ctrlKey || e.altKey || document.querySelector("dialog[open]")) return;
      if (t && (t.tagName === "INPUT" || t.tagName === "TEXTAREA" || t.tagName === "SELECT")) return;
      const n = rowsRef.current.length;
      if (e.key === "j") setSelected((s) => Math.min(s + 1, n - 1));
      else if (e.key === "k") setSelected((s) => Math.max(s - 1, 0));
      else if (e.key === "Enter" && t?.tagName !== "A" && t?.tagName !== "BUTTON") {
        setSelected((s) => {
          const w = rowsRef.current[s];
          if (w) navigate(paths.workflow(ns, w.workflowId));
          return s;
        });
      }
    };
    window.addEventListener("keydown", onKey);
    return () => window.removeEventListener("keydown", onKey);
  }, [ns]);
  useEffect(() => {
    document.querySelector(`tr[data-index="${selected}"]`)?.scrollIntoView({ block: "nearest" });
  }, [selected]);

  const painted = list.data !== undefined;
  useEffect(() => {
    if (painted && !listPaintedMarked) {
      listPaintedMarked = true;
      performance.mark("waymark:list-painted");
    }
  }, [painted]);

  const [bulk, setBulk] = useState<BulkKind | undefined>();
  const anyFilter = FILTER_KEYS.some((k) => urlFilters[k]);
  const set = (k: keyof Filters) => (e: Event) => setInputs({ ...inputs, [k]: (e.target as HTMLInputElement).value });
  const tagProblem = parseTags(inputs.tag).bad;

  return (
    <div class="page">
      <PageHead
        title="Workflows"
        sub={
          <>
            Namespace <code>{ns}</code>, newest first{onFirstPage ? ", refreshed every 2 s" : ""}
          </>
        }
      >
        {countShown?.total !== undefined ? (
          <span class="count" data-testid="count">
            {plural(countShown.total, "workflow")} match
          </span>
        ) : (
          <button type="button" class="btn" onClick={() => void countMatching()} disabled={countShown?.busy} title="Counts every matching workflow once (a count over many rows costs the database)">
            {countShown?.busy ? "Counting…" : "Count matching"}
          </button>
        )}
        {caps.write && (
          <select
            class="btn"
            aria-label="Bulk action on every matching workflow"
            data-testid="bulk-action"
            value=""
            onChange={(e) => {
              const v = (e.target as HTMLSelectElement).value as BulkKind | "";
              if (v) setBulk(v);
            }}
          >
            <option value="">Bulk action…</option>
            <option value="cancel">Cancel all matching</option>
            <option value="resume">Resume all matching</option>
            <option value="delete">Delete all matching</option>
          </select>
        )}
      </PageHead>

      <form class="filters" onSubmit={(e) => e.preventDefault()} role="search" aria-label="Filter workflows">
        <label>
          <span>Status</span>
          <select
            data-testid="filter-status"
            data-filter
            value={inputs.status}
            onChange={(e) => {
              const next = { ...inputs, status: (e.target as HTMLSelectElement).value };
              setInputs(next);
              const q = queryOf(next);
              written.current = String(q) ? `?${q}` : "";
              setQuery(q, { push: true });
            }}
          >
            <option value="">Any</option>
            {STATUSES.map((s) => (
              <option key={s} value={statusName(s)}>
                {statusName(s)}
              </option>
            ))}
          </select>
        </label>
        <label>
          <span>Name</span>
          <input data-testid="filter-name" value={inputs.name} onInput={set("name")} placeholder="workflow name" spellcheck={false} />
        </label>
        <label>
          <span>Queue</span>
          <input data-testid="filter-queue" value={inputs.queue} onInput={set("queue")} placeholder="queue" spellcheck={false} />
        </label>
        <label>
          <span>Id prefix</span>
          <input data-testid="filter-prefix" value={inputs.prefix} onInput={set("prefix")} placeholder="order-" spellcheck={false} />
        </label>
        <label>
          <span>Tags</span>
          <input data-testid="filter-tag" value={inputs.tag} onInput={set("tag")} placeholder="team=payments" spellcheck={false} aria-invalid={tagProblem.length > 0} />
        </label>
        <label>
          <span>Parent</span>
          <input data-testid="filter-parent" value={inputs.parent} onInput={set("parent")} placeholder="parent workflow id" spellcheck={false} />
        </label>
        <label>
          <span>Version</span>
          <input data-testid="filter-version" value={inputs.version} onInput={set("version")} placeholder="app version" spellcheck={false} />
        </label>
        <label>
          <span>Worker</span>
          <input data-testid="filter-worker" value={inputs.worker} onInput={set("worker")} placeholder="worker id" spellcheck={false} />
        </label>
        <label>
          <span>Created from</span>
          <input
            type="datetime-local"
            step={1}
            data-testid="filter-from"
            value={toLocalInput(inputs.from)}
            onInput={(e) => setInputs({ ...inputs, from: fromLocalInput((e.target as HTMLInputElement).value) })}
          />
        </label>
        <label>
          <span>Created before</span>
          <input
            type="datetime-local"
            step={1}
            data-testid="filter-to"
            value={toLocalInput(inputs.to)}
            onInput={(e) => setInputs({ ...inputs, to: fromLocalInput((e.target as HTMLInputElement).value) })}
          />
        </label>
        {anyFilter && (
          <button
            type="button"
            class="link-button clear"
            onClick={() => {
              const empty = filtersFrom("");
              setInputs(empty);
              written.current = "";
              setQuery(new URLSearchParams(), { push: true });
            }}
          >
            Clear filters
          </button>
        )}
      </form>
      {tagProblem.length > 0 && <p class="note">Tags are written key=value, separated by commas: {tagProblem.join(", ")} is not.</p>}
      {countShown?.error && <ErrorBox error={countShown.error} title="Counting failed" />}
      {list.error && <ErrorBox error={list.error} title="Listing failed" />}

      {list.data === undefined && list.loading ? (
        <Loading what="Loading workflows" />
      ) : rows.length === 0 && list.data ? (
        <Empty>
          {anyFilter ? (
            <>No workflow matches these filters{onFirstPage ? "" : " on this page"}.</>
          ) : (
            <>
              No workflows in <code>{ns}</code> yet. Start one with an SDK's client (<code>client.start(…)</code>) or <code>waymark workflow start</code>.
            </>
          )}
        </Empty>
      ) : (
        <div class="table-wrap">
          <table class="table workflows" aria-label="Workflows">
            <thead>
              <tr>
                <th scope="col">Id</th>
                <th scope="col">Name</th>
                <th scope="col">Status</th>
                <th scope="col">Queue</th>
                <th scope="col">Created</th>
                <th scope="col">Updated / took</th>
                <th scope="col">Version</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((w, i) => (
                <WorkflowRow key={w.workflowId} ns={ns} w={w} index={i} selected={i === selected} />
              ))}
            </tbody>
          </table>
        </div>
      )}
      <div class="pager">
        <button type="button" class="btn" disabled={onFirstPage} onClick={() => setTokens(tokens.slice(0, -1))} data-testid="page-prev">
          ← Previous
        </button>
        <span class="muted">
          Page {tokens.length}
          {rows.length > 0 && ` · ${rows.length} shown`}
        </span>
        <button
          type="button"
          class="btn"
          disabled={!list.data?.nextPageToken}
          onClick={() => list.data?.nextPageToken && setTokens([...tokens, list.data.nextPageToken])}
          data-testid="page-next"
        >
          Next →
        </button>
      </div>
      {bulk && <BulkDialog kind={bulk} filter={filter} anyFilter={anyFilter} onClose={() => setBulk(undefined)} onDone={list.reload} />}
    </div>
  );
}

function WorkflowRow({ ns, w, index, selected }: { ns: string; w: Workflow; index: number; selected: boolean }) {
  const terminal = TERMINAL.has(w.status);
  const start = tsMs(w.startedAt) ?? tsMs(w.createdAt);
  const end = tsMs(w.updatedAt);
  return (
    <tr
      data-testid="workflow-row"
      data-workflow-id={w.workflowId}
      data-status={statusName(w.status)}
      data-index={index}
      class={selected ? "selected clickable" : "clickable"}
      aria-selected={selected}
      onClick={(e) => {
        // A click anywhere on the row opens it, unless it was on a link or a selection of text.
        const t = e.target as HTMLElement;
        if (!isPlainClick(e) || t.closest("a, button") || String(getSelection() ?? "") !== "") return;
        navigate(paths.workflow(ns, w.workflowId));
      }}
    >
      <td class="id-cell">
        <Link href={paths.workflow(ns, w.workflowId)} class="mono">
          {w.workflowId}
        </Link>
      </td>
      <td>{w.workflowName}</td>
      <td>
        <StatusBadge status={w.status} />
      </td>
      <td>{w.queueName}</td>
      <td>
        <Time ts={w.createdAt} />
      </td>
      <td>
        {terminal && start !== undefined && end !== undefined ? (
          <span title="From its first dispatch (or creation) to its end">
            took <Dur ms={end - start} />
          </span>
        ) : (
          <Age ts={w.updatedAt} />
        )}
      </td>
      <td class="mono">{w.appVersion || <span class="muted">—</span>}</td>
    </tr>
  );
}

type BulkKind = "cancel" | "resume" | "delete";

const BULK_VERB: Record<BulkKind, [string, string]> = {
  cancel: ["cancel", "Cancelled"],
  resume: ["resume", "Resumed"],
  delete: ["delete", "Deleted"],
};

function actionOf(kind: BulkKind): BulkWorkflowsRequest["action"] {
  switch (kind) {
    case "cancel":
      return { case: "cancel", value: create(BulkCancelSchema) };
    case "resume":
      return { case: "resume", value: create(BulkResumeSchema) };
    case "delete":
      return { case: "delete", value: create(BulkDeleteSchema) };
  }
}

/** A dry run first ("This will cancel N workflows"), then batch after batch until done. */
function BulkDialog({ kind, filter: fields, anyFilter, onClose, onDone }: { kind: BulkKind; filter: FilterFields; anyFilter: boolean; onClose: () => void; onDone: () => void }) {
  const [verb, done] = BULK_VERB[kind];
  const filter = create(WorkflowFilterSchema, fields);
  const dry = useQuery(() => clients.workflows.bulkWorkflows({ filter, action: actionOf(kind), dryRun: true }), [kind]);
  const [progress, setProgress] = useState<{ matched: number; applied: number; skipped: Record<string, number>; batches: number; finished: boolean } | undefined>();
  const run = async () => {
    const p = { matched: 0, applied: 0, skipped: {} as Record<string, number>, batches: 0, finished: false };
    setProgress({ ...p });
    let pageToken = "";
    try {
      for (;;) {
        const r = await clients.workflows.bulkWorkflows({ filter, action: actionOf(kind), pageToken, batchSize: 500 });
        p.matched += r.matched;
        p.applied += r.applied;
        p.batches += 1;
        for (const [reason, n] of Object.entries(r.skipped)) p.skipped[reason] = (p.skipped[reason] ?? 0) + n;
        setProgress({ ...p, skipped: { ...p.skipped } });
        if (!r.nextPageToken) break;
        pageToken = r.nextPageToken;
      }
      setProgress({ ...p, skipped: { ...p.skipped }, finished: true });
      onDone();
    } catch (e) {
      setProgress({ ...p, skipped: { ...p.skipped } });
      throw e;
    }
  };
  const total = dry.data?.total;
  return (
    <Dialog
      title={`Bulk ${verb}`}
      onClose={onClose}
      onConfirm={progress?.finished ? undefined : run}
      confirmTestid="bulk-confirm"
      confirmLabel={total !== undefined ? `${verb[0]!.toUpperCase()}${verb.slice(1)} ${plural(total, "workflow")}` : "Confirm"}
      confirmDisabled={dry.data === undefined || total === 0n}
      danger={kind !== "resume"}
    >
      {dry.error && <ErrorBox error={dry.error} title="The dry run was refused" />}
      {dry.data === undefined && !dry.error && <Loading what="Counting what this filter matches" />}
      {total !== undefined && !progress && (
        <p data-testid="bulk-summary">
          This will {verb} <strong>{plural(total, "workflow")}</strong>
          {anyFilter ? " matching the current filters" : <strong> — every workflow of the namespace (no filter is set)</strong>}. Workflows it does not apply to are skipped and counted.
        </p>
      )}
      {progress && (
        <div class="bulk-progress" data-testid="bulk-progress" aria-live="polite">
          <progress max={Number(total ?? 0n) || 1} value={progress.matched} />
          <p>
            {progress.finished ? "Done. " : "Working… "}
            {done} {plural(progress.applied, "workflow")} of {progress.matched.toLocaleString()} looked at, in {plural(progress.batches, "batch", "batches")}.
          </p>
          {Object.keys(progress.skipped).length > 0 && (
            <table class="table compact">
              <thead>
                <tr>
                  <th>Skipped because</th>
                  <th class="num">Workflows</th>
                </tr>
              </thead>
              <tbody>
                {Object.entries(progress.skipped).map(([reason, n]) => (
                  <tr key={reason}>
                    <td>
                      <code>{reason}</code>
                    </td>
                    <td class="num">{n.toLocaleString()}</td>
                  </tr>
                ))}
              </tbody>
            </table>
          )}
        </div>
      )}
    </Dialog>
  );
}
