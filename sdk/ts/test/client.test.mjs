// The client against a real three-node cluster (bin/ticketd, `make build`).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  createClient, LockedError, NotHeldError, LeaseLostError, ReleasedError, InvalidArgumentError, LockEventType,
} from "../dist/index.js";
import { nodeTransport } from "../dist/node.js";
import { startCluster } from "./cluster.mjs";

describe("client against a three-node cluster", () => {
  let cluster;
  let client;
  before(async () => {
    cluster = await startCluster({ args: ["--lease-min-ms", "100"] });
    client = createClient({ endpoints: cluster.endpoints, transport: nodeTransport() });
  });
  after(async () => {
    await client?.close();
    await cluster?.close();
  });

  test("acquire_renew_release", async () => {
    const lease = await client.lock("ts/a", { ttlMs: 300 });
    assert.equal(typeof lease.token, "bigint");
    assert.ok(lease.token > 0n);
    // Several renewal periods (ttl/3) pass: the lease must still be held.
    await new Promise((r) => setTimeout(r, 700));
    assert.equal(lease.signal.aborted, false, `lease lost: ${lease.signal.reason}`);
    assert.deepEqual(await client.checkToken("ts/a", lease.token), { valid: true, currentToken: lease.token });
    const info = await client.getLock("ts/a");
    assert.equal(info.held, true);
    assert.equal(info.owner, lease.owner);
    await lease.release();
    assert.ok(lease.signal.reason instanceof ReleasedError);
    assert.equal((await client.getLock("ts/a")).held, false);
    await lease.release(); // idempotent
  });

  test("try_lock_held_and_errors", async () => {
    const a = await client.tryLock("ts/b", { ttlMs: 5000 });
    await assert.rejects(client.tryLock("ts/b", { ttlMs: 5000 }), LockedError);
    await assert.rejects(client.release("ts/b", a.token + 1000n), NotHeldError);
    await assert.rejects(client.tryLock("", { ttlMs: 5000 }), InvalidArgumentError);
    const again = await client.tryLock("ts/b", { ttlMs: 5000, owner: a.owner });
    assert.equal(again.token, a.token, "a retry with the same owner gets the same grant");
    const list = await client.listLocks("ts/");
    assert.deepEqual(list.map((l) => l.key), ["ts/b"]);
    assert.ok(list.readIndex > 0n);
    await a.release();
  });

  test("wait_in_queue", async () => {
    const a = await client.lock("ts/c", { ttlMs: 5000 });
    const pending = client.lock("ts/c", { ttlMs: 5000 });
    let granted = false;
    pending.then(() => (granted = true), () => {});
    await new Promise((r) => setTimeout(r, 200));
    assert.equal(granted, false, "waiter granted while the key was held");
    await a.release();
    const b = await pending;
    assert.ok(b.token > a.token, "fencing tokens increase");
    await b.release();
  });

  test("grpc_protocol", async () => {
    const g = createClient({ endpoints: cluster.endpoints, transport: nodeTransport({ protocol: "grpc" }) });
    try {
      const l = await g.tryLock("ts/grpc", { ttlMs: 2000 });
      assert.equal((await g.getLock("ts/grpc")).token, l.token);
      await l.release();
    } finally {
      await g.close();
    }
  });

  test("watch_and_resume", async () => {
    const ac = new AbortController();
    const seen = [];
    const it = client.watch("ts/w/", { signal: ac.signal })[Symbol.asyncIterator]();
    const first = it.next(); // opens the stream
    await new Promise((r) => setTimeout(r, 300));
    const l = await client.tryLock("ts/w/1", { ttlMs: 5000 });
    await l.release();
    seen.push((await first).value);
    seen.push((await it.next()).value);
    assert.deepEqual(seen.map((e) => [e.type, e.key, e.token]), [
      [LockEventType.GRANTED, "ts/w/1", l.token],
      [LockEventType.RELEASED, "ts/w/1", l.token],
    ]);
    assert.ok(seen[1].index > seen[0].index);
    ac.abort();
    // Resume from an index: the same two changes again, in order.
    const again = [];
    for await (const e of client.watch("ts/w/", { startIndex: seen[0].index, signal: AbortSignal.timeout(5000) })) {
      again.push(e);
      if (again.length === 2) break;
    }
    assert.deepEqual(again.map((e) => e.index), seen.map((e) => e.index));
  });

  test("watch_resumes_on_another_node", async () => {
    const leader = await cluster.leader();
    const f = (leader + 1) % cluster.nodes.length; // a follower: the cluster keeps its quorum
    const w = createClient({
      endpoints: [cluster.endpoints[f], ...cluster.endpoints.filter((_, i) => i !== f)],
      transport: nodeTransport({ keepAliveMs: 500 }),
    });
    const ac = new AbortController();
    try {
      const it = w.watch("ts/r/", { signal: ac.signal })[Symbol.asyncIterator]();
      const first = it.next();
      await new Promise((r) => setTimeout(r, 300));
      const a = await client.tryLock("ts/r/1", { ttlMs: 5000 });
      assert.equal((await first).value.token, a.token);
      await cluster.kill(f);
      await a.release();
      const b = await client.tryLock("ts/r/2", { ttlMs: 5000 });
      await b.release();
      const got = [];
      for (let i = 0; i < 3; i++) got.push((await it.next()).value);
      assert.deepEqual(got.map((e) => [e.typeName, e.key]), [
        ["RELEASED", "ts/r/1"], ["GRANTED", "ts/r/2"], ["RELEASED", "ts/r/2"],
      ]);
    } finally {
      ac.abort();
      await w.close();
      cluster.start(f);
      await cluster.leader();
    }
  });

  test("lease_lost_when_cluster_paused", async () => {
    const lease = await client.lock("ts/lost", { ttlMs: 400 });
    cluster.pause();
    try {
      const reason = await new Promise((resolve) => {
        if (lease.signal.aborted) resolve(lease.signal.reason);
        lease.signal.addEventListener("abort", () => resolve(lease.signal.reason), { once: true });
      });
      assert.ok(reason instanceof LeaseLostError, `reason: ${reason}`);
    } finally {
      cluster.resume();
    }
  });

  test("failover_after_leader_kill", async () => {
    const a = await client.lock("ts/f", { ttlMs: 5000 });
    const leader = await cluster.leader();
    await cluster.kill(leader);
    // The client finds the new leader; the lock keeps its token.
    const info = await client.getLock("ts/f", { signal: AbortSignal.timeout(20_000) });
    assert.equal(info.token, a.token);
    const b = await client.tryLock("ts/f2", { ttlMs: 2000, signal: AbortSignal.timeout(20_000) });
    assert.ok(b.token > a.token);
    await b.release();
    await a.release();
  });
});
