// Tests that need something a machine may lack (a program another toolchain builds). Elsewhere
// they skip, saying what is missing; under WAYMARK_NO_SKIP=1 (set by .ci/run) they fail with
// the same words instead, because a skip there would hide a missing install step behind a
// green run.

import { test, type TestContext } from "node:test";
import assert from "node:assert/strict";

/** Whether skipping is forbidden here (CI). */
export function skipsForbidden(): boolean {
  return process.env.WAYMARK_NO_SKIP === "1";
}

/**
 * Declares test `name`, which needs what `missing` names (undefined when nothing is missing):
 * skipped when something is, or failed with that reason when skipping is forbidden.
 */
export function testNeeding(name: string, missing: string | undefined, fn: (t: TestContext) => Promise<void>): void {
  if (missing === undefined) {
    test(name, fn);
  } else if (skipsForbidden()) {
    test(name, () => assert.fail(`${missing}; WAYMARK_NO_SKIP=1 forbids skipping this test`));
  } else {
    test(name, { skip: missing }, fn);
  }
}
