// The web console's committed build (server/console/dist) must be what a
// fresh, deterministic build of sdk/ts/console produces.
import assert from "node:assert/strict";
import { test } from "node:test";
import { consoleFiles, staleFiles } from "../scripts/build-console.mjs";

test("console_build_is_deterministic", async () => {
  const a = await consoleFiles();
  const b = await consoleFiles();
  for (const name of Object.keys(a)) assert.ok(a[name].equals(b[name]), `${name} differs between two builds`);
});

test("console_dist_is_fresh", async () => {
  assert.deepEqual(await staleFiles(), [], "server/console/dist is stale: run 'make console' and commit the result");
});
