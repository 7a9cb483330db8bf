// Changing workflow code safely while old runs are still going: `patched` tells new code whether
// this run began under it (take the new branch) or under code without the change (replay the
// old branch), by a marker the new branch records (`waymark.patch {"patch_id": "…"}`).

import type { Run } from "./run.js";
import { BUILTIN, patchRecord } from "./history.js";

/**
 * Whether this run takes the branch of the code change `patchId`: true for a run that gets here
 * live (the marker is recorded at the next position, held back like a step's result, so it costs
 * no round trip of its own) and for every replay of such a run; false for a run whose history
 * holds something else there (made by code without the change): no position is taken, so the
 * old branch's next call replays where it was recorded.
 */
export function patched(run: Run, patchId: string): boolean {
  const found = run.history.patched(patchId);
  if (found.kind === "old") return false;
  if (found.kind === "replayed") return true;
  // Offline, a history that ends here ends the replay here, as any live call does.
  run.live(found.stepId);
  // A cancelled (or dropped) run records nothing more.
  run.checkCancelled();
  const marker = run.payload(`the record of ${BUILTIN.patch}`, patchRecord(patchId));
  run.defer(found.stepId, BUILTIN.patch, { case: "output", value: marker }, 1);
  return true;
}
