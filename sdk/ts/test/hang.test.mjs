// A test that hangs on purpose, and only when TICKETD_TEST_HANG=1:
// scripts/check-test-limits.sh runs it through `make test-ts` (TS_TESTS
// names this file) to show that the suite's limits stop a hung test, that
// the output names it, and that its cluster does not outlive it. It starts
// a real cluster, writes its nodes' process ids (one a line) to ts.pids in
// the directory $TICKETD_TEST_HANG_PIDS_DIR when set, and waits on a watch of a prefix nobody writes to,
// as a client waiting for a change that never comes does.
import { writeFileSync } from "node:fs";
import path from "node:path";
import { test } from "node:test";
import { createClient } from "../dist/index.js";
import { nodeTransport } from "../dist/node.js";
import { startCluster } from "./cluster.mjs";

const hang = process.env.TICKETD_TEST_HANG === "1";

test("hangs_when_asked", { skip: !hang && "hangs on purpose: set TICKETD_TEST_HANG=1" }, async () => {
  const cluster = await startCluster();
  if (process.env.TICKETD_TEST_HANG_PIDS_DIR) {
    writeFileSync(path.join(process.env.TICKETD_TEST_HANG_PIDS_DIR, "ts.pids"), cluster.nodes.map((n) => `${n.proc.pid}\n`).join(""));
  }
  const client = createClient({ endpoints: cluster.endpoints, transport: nodeTransport() });
  for await (const ev of client.watch("hang/")) {
    console.log("unexpected event", ev);
  }
  throw new Error("the watch ended");
});
