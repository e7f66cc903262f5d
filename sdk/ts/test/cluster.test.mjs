// The test cluster's own promises: a node "stopped" by the harness has
// stopped every thread, so a test that pauses followers knows they cannot
// read, fsync or answer any more (a grant then cannot commit).
import { spawn } from "node:child_process";
import { readdirSync, readFileSync } from "node:fs";
import assert from "node:assert/strict";
import { test } from "node:test";

import { stopped } from "./cluster.mjs";

// A child with four worker threads that never sleep: on a busy machine the
// kernel reaches some of them only milliseconds after kill(SIGSTOP) returns.
const busy = `
const { Worker } = require("node:worker_threads");
for (let i = 0; i < 4; i++) new Worker("for (;;) {}", { eval: true });
for (;;) {}
`;

function running(pid) {
  const out = [];
  for (const tid of readdirSync(`/proc/${pid}/task`)) {
    let stat;
    try {
      stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
    } catch {
      continue;
    }
    const state = stat[stat.lastIndexOf(")") + 2];
    if (state !== "T" && state !== "t") out.push(`${tid}:${state}`);
  }
  return out;
}

test("stopped_waits_for_every_thread", { skip: process.platform !== "linux" }, async () => {
  const child = spawn(process.execPath, ["-e", busy], { stdio: "ignore" });
  const exited = new Promise((res) => child.once("exit", res));
  try {
    await new Promise((res) => setTimeout(res, 300)); // the workers are up and spinning
    for (let round = 0; round < 30; round++) {
      child.kill("SIGSTOP");
      await stopped(child.pid);
      assert.deepEqual(running(child.pid), [], `round ${round}: threads still running after stopped()`);
      child.kill("SIGCONT");
      await new Promise((res) => setTimeout(res, 5));
    }
  } finally {
    child.kill("SIGKILL");
    await exited;
  }
});

test("stopped_of_an_exited_process_resolves", async () => {
  const child = spawn(process.execPath, ["-e", "0"], { stdio: "ignore" });
  const pid = child.pid;
  await new Promise((res) => child.once("exit", res));
  await stopped(pid);
});
