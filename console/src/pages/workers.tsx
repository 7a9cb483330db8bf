// The workers connected to the namespace, through any replica.

import { clients } from "../api.js";
import { Age, Empty, ErrorBox, Link, Loading, PageHead, Time } from "../components.js";
import type { WorkerInfo } from "../gen/waymark/v1/worker_pb.js";
import { useQuery, useTitle } from "../hooks.js";
import { paths } from "../router.js";

function Names({ names }: { names: readonly string[] }) {
  if (names.length === 0) return <span class="muted">—</span>;
  const shown = names.slice(0, 6);
  return (
    <span class="names" title={names.join("\n")}>
      {shown.map((n) => (
        <code key={n}>{n}</code>
      ))}
      {names.length > shown.length && <span class="muted"> +{names.length - shown.length} more</span>}
    </span>
  );
}

export function WorkersTable({ ns, workers }: { ns: string; workers: readonly WorkerInfo[] }) {
  if (workers.length === 0) return <Empty>No worker is connected.</Empty>;
  return (
    <div class="table-wrap">
      <table class="table">
        <thead>
          <tr>
            <th>Worker</th>
            <th>App</th>
            <th>SDK</th>
            <th>Queues</th>
            <th>Workflows</th>
            <th>Steps</th>
            <th class="num" title="Workflow credits / step credits the server may still use">
              Credits
            </th>
            <th class="num">In flight</th>
            <th>Connected</th>
            <th>Last heartbeat</th>
          </tr>
        </thead>
        <tbody>
          {workers.map((w) => (
            <tr key={`${w.workerId}/${String(w.connectedAt?.seconds)}`} data-testid="worker-row" data-worker-id={w.workerId}>
              <td class="mono">
                <Link href={paths.workflows(ns, new URLSearchParams({ worker: w.workerId }))} title="The workflows it runs or last ran">
                  {w.workerId}
                </Link>
              </td>
              <td>
                {w.appName || <span class="muted">—</span>}
                {w.appVersion && (
                  <>
                    {" "}
                    <code>{w.appVersion}</code>
                  </>
                )}
              </td>
              <td class="mono small">{w.sdk}</td>
              <td>
                <span class="names">
                  {w.queues.map((q) => (
                    <Link key={q} href={paths.queue(ns, q)}>
                      {q}
                    </Link>
                  ))}
                </span>
              </td>
              <td>
                <Names names={w.workflowNames} />
              </td>
              <td>
                <Names names={w.stepNames} />
              </td>
              <td class="num">
                {w.workflowCredits} / {w.stepCredits}
              </td>
              <td class="num">{w.workflowsInFlight}</td>
              <td>
                <Time ts={w.connectedAt} />
              </td>
              <td>
                <Age ts={w.lastHeartbeat} />
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  );
}

export function WorkersPage({ ns }: { ns: string }) {
  useTitle(`Workers · ${ns}`);
  const q = useQuery((signal) => clients.workers.listWorkers({}, { signal }), [ns], { refreshMs: 5000 });
  return (
    <div class="page">
      <PageHead title="Workers" sub={<>Connected to namespace <code>{ns}</code> through any replica; refreshed every 5 s</>} />
      {q.error && <ErrorBox error={q.error} />}
      {q.data ? <WorkersTable ns={ns} workers={q.data.workers} /> : !q.error && <Loading what="Loading workers" />}
    </div>
  );
}
