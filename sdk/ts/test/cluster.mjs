// A real ticketd cluster for the tests: bin/ticketd processes on loopback
// ports picked at random, data in a fresh temporary directory, every
// process killed by close(). TICKETD_BIN overrides the binary's path.
import { spawn } from "node:child_process";
import { mkdtempSync, openSync, readdirSync, rmSync, readFileSync } from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import { fileURLToPath } from "node:url";

const repo = path.resolve(path.dirname(fileURLToPath(import.meta.url)), "../../..");
export const binary = process.env.TICKETD_BIN ?? path.join(repo, "bin", "ticketd");

/** freePorts returns n distinct loopback ports, all held open while chosen. */
export async function freePorts(n) {
  const servers = [];
  for (let i = 0; i < n; i++) {
    const s = net.createServer();
    await new Promise((res, rej) => s.listen(0, "127.0.0.1", res).on("error", rej));
    servers.push(s);
  }
  const ports = servers.map((s) => s.address().port);
  await Promise.all(servers.map((s) => new Promise((res) => s.close(res))));
  return ports;
}

/**
 * stopped resolves once every thread of process pid is in the stopped state
 * ("T" in /proc/<pid>/task/<tid>/stat), polling every millisecond for up to
 * 10 s. kill(2) returns as soon as SIGSTOP is queued; the kernel then stops
 * the threads one by one as each is scheduled, so on a busy machine a
 * "stopped" node can still read, fsync and answer for milliseconds (the Go
 * tests' procstop package does the same). A thread or process that has
 * exited counts as stopped. Linux only; elsewhere it resolves at once.
 */
export async function stopped(pid) {
  if (process.platform !== "linux") return;
  const end = Date.now() + 10_000;
  for (;;) {
    let running = [];
    try {
      for (const tid of readdirSync(`/proc/${pid}/task`)) {
        let stat;
        try {
          stat = readFileSync(`/proc/${pid}/task/${tid}/stat`, "utf8");
        } catch {
          continue; // the thread exited
        }
        const state = stat.slice(stat.lastIndexOf(")") + 2, stat.lastIndexOf(")") + 3);
        if (state !== "T" && state !== "t") running.push(`${tid}:${state}`);
      }
    } catch {
      return; // the process exited
    }
    if (running.length === 0) return;
    if (Date.now() > end) {
      process.kill(pid, "SIGCONT");
      throw new Error(`pid ${pid}: threads ${running.join(", ")} still running 10 s after SIGSTOP`);
    }
    await new Promise((res) => setTimeout(res, 1));
  }
}

/**
 * status asks one node for its Status over Connect JSON (as the holder of
 * bearer token `token`, when authorization is on); undefined when
 * unreachable.
 */
export async function status(addr, token) {
  const headers = { "content-type": "application/json" };
  if (token) headers.authorization = `Bearer ${token}`;
  try {
    const r = await fetch(`http://${addr}/ticket.v1.ClusterService/Status`, {
      method: "POST",
      headers,
      body: "{}",
      signal: AbortSignal.timeout(1000),
    });
    return r.ok ? await r.json() : undefined;
  } catch {
    return undefined;
  }
}

// Every node process started here, killed when this process ends however
// it ends: node:test stops a test file that ran out of time (--test-timeout)
// with SIGTERM, and `make test`'s wall-clock limit sends SIGTERM too; a
// node left behind would outlive the run, holding its ports.
const started = new Set();
process.once("exit", () => {
  for (const p of started) if (p.exitCode === null && p.signalCode === null) p.kill("SIGKILL");
});
for (const [sig, code] of [["SIGTERM", 143], ["SIGINT", 130]]) process.once(sig, () => process.exit(code));

/**
 * startCluster starts `nodes` ticketd processes bootstrapped together with
 * extra `args` (an array, or a function of the nodes' {id, api, raft} and
 * the cluster's temporary directory, for files the args name, that returns
 * one), and waits until they agree on a leader. `token` is the bearer
 * token its own Status probes send (a cluster with authorization on).
 */
export async function startCluster({ nodes = 3, args = [], token } = {}) {
  const dir = mkdtempSync(path.join(os.tmpdir(), "ticketd-ts-"));
  const ports = await freePorts(2 * nodes);
  const list = [];
  for (let i = 0; i < nodes; i++) {
    list.push({ id: `n${i + 1}`, api: `127.0.0.1:${ports[2 * i]}`, raft: `127.0.0.1:${ports[2 * i + 1]}` });
  }
  const peers = list.map((n) => `${n.id}=${n.raft}/${n.api}`).join(",");
  if (typeof args === "function") args = args(list, dir);
  const c = {
    dir,
    nodes: list,
    endpoints: list.map((n) => n.api),
    start(i) {
      const n = list[i];
      n.log = path.join(dir, `${n.id}.log`);
      const fd = openSync(n.log, "a");
      n.proc = spawn(
        binary,
        ["serve", "--id", n.id, "--api-addr", n.api, "--raft-addr", n.raft, "--data-dir", path.join(dir, n.id),
          "--bootstrap", peers, "--raft-election-timeout-ms", "500", "--raft-heartbeat-ms", "100", ...args],
        { stdio: ["ignore", fd, fd] },
      );
      const proc = n.proc;
      started.add(proc);
      n.exited = new Promise((res) => proc.once("exit", res));
      n.exited.then(() => started.delete(proc));
    },
    /** kill sends SIGKILL to node i and waits for it to exit. */
    async kill(i) {
      list[i].proc.kill("SIGKILL");
      await list[i].exited;
    },
    /**
     * stop stops node i (SIGSTOP): it holds its connections and answers
     * nothing. It resolves once every thread of the node has stopped
     * (stopped below), not when the signal is queued.
     */
    async stop(i) {
      list[i].proc.kill("SIGSTOP");
      await stopped(list[i].proc.pid);
    },
    /** pause and resume stop and continue every node (SIGSTOP, SIGCONT); pause waits as stop does. */
    async pause() {
      const live = list.filter((n) => n.proc.exitCode === null);
      for (const n of live) n.proc.kill("SIGSTOP");
      await Promise.all(live.map((n) => stopped(n.proc.pid)));
    },
    resume() {
      for (const n of list) if (n.proc.exitCode === null) n.proc.kill("SIGCONT");
    },
    /** leader waits for a leader that every running node names and returns its index. */
    async leader(timeoutMs = 30_000) {
      const end = Date.now() + timeoutMs;
      while (Date.now() < end) {
        const running = list.filter((n) => n.proc.exitCode === null && n.proc.signalCode === null);
        const sts = await Promise.all(running.map((n) => status(n.api, token)));
        const ids = new Set(sts.map((s) => s?.leaderId ?? ""));
        if (ids.size === 1 && !ids.has("")) {
          const id = [...ids][0];
          return list.findIndex((n) => n.id === id);
        }
        await new Promise((r) => setTimeout(r, 50));
      }
      throw new Error(`no leader within ${timeoutMs} ms; logs in ${dir}`);
    },
    logs() {
      return list.map((n) => `== ${n.id}\n${readFileSync(n.log, "utf8").slice(-2000)}`).join("\n");
    },
    /** close kills every node and removes the data. */
    async close() {
      this.resume();
      for (const n of list) {
        if (n.proc && n.proc.exitCode === null && n.proc.signalCode === null) n.proc.kill("SIGKILL");
      }
      await Promise.all(list.map((n) => n.exited));
      rmSync(dir, { recursive: true, force: true });
    },
  };
  for (let i = 0; i < nodes; i++) c.start(i);
  await c.leader();
  return c;
}
