// The client against a real three-node cluster (bin/ticketd, `make build`).
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  createClient, LockedError, NotHeldError, LeaseLostError, ReleasedError, InvalidArgumentError, LockEventType,
  LimitMismatchError, FailedPreconditionError, SessionNotFoundError, Mode,
} from "../dist/index.js";
import { Code } from "@connectrpc/connect";
import { nodeTransport } from "../dist/node.js";
import { startCluster } from "./cluster.mjs";
import { openWatch, nextEvent, EVENT_MS } from "./bounded.mjs";

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
    // A TTL long enough that a renewal (every ttl/3) answered late on a
    // starved machine still lands before the local deadline (ttl - 50 ms
    // after the last acknowledged send): 2 s of slack.
    const lease = await client.lock("ts/a", { ttlMs: 3000 });
    assert.equal(typeof lease.token, "bigint");
    assert.ok(lease.token > 0n);
    // More than a TTL passes (several renewal periods): the lease must still be held.
    await new Promise((r) => setTimeout(r, 4000));
    assert.equal(lease.signal.aborted, false, `lease lost: ${lease.signal.reason}`);
    assert.deepEqual(await client.checkToken("ts/a", lease.token), { valid: true, currentToken: lease.token, mode: Mode.EXCLUSIVE, limit: 0 });
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
    const { it, first, at } = await openWatch(client.watch("ts/w/", { signal: ac.signal }), "ts/w/");
    const l = await client.tryLock("ts/w/1", { ttlMs: 5000 });
    await l.release();
    seen.push(await nextEvent(it, "the grant", first));
    seen.push(await nextEvent(it, "the release"));
    assert.deepEqual(seen.map((e) => [e.type, e.key, e.token]), [
      [LockEventType.GRANTED, "ts/w/1", l.token],
      [LockEventType.RELEASED, "ts/w/1", l.token],
    ]);
    assert.ok(seen[0].index > at, "changes come after the announced start");
    assert.ok(seen[1].index > seen[0].index);
    ac.abort();
    // Resume from an index: the same two changes again, in order, after a
    // start announced just before them.
    const again = [];
    const w = client.watch("ts/w/", { startIndex: seen[0].index, signal: AbortSignal.timeout(EVENT_MS) });
    for await (const e of w) {
      again.push(e);
      if (again.length === 2) break;
    }
    assert.deepEqual(again.map((e) => e.index), seen.map((e) => e.index));
    assert.equal(await w.started, seen[0].index - 1n);
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
      const { it, first } = await openWatch(w.watch("ts/r/", { signal: ac.signal }), "ts/r/");
      const a = await client.tryLock("ts/r/1", { ttlMs: 5000 });
      assert.equal((await nextEvent(it, "the grant", first)).token, a.token);
      await cluster.kill(f);
      await a.release();
      const b = await client.tryLock("ts/r/2", { ttlMs: 5000 });
      await b.release();
      const got = [];
      for (let i = 0; i < 3; i++) got.push(await nextEvent(it, `change ${i} after the kill`));
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

  test("watch_cut_before_its_first_change_misses_nothing", async () => {
    // The node serving the watch stops after announcing the start and
    // before any change; a grant and a release commit without it; then it
    // dies. The watch resumes on another node right after the announced
    // start, not "from now" there (which would start after both changes and
    // never deliver them).
    const leader = await cluster.leader();
    const f = (leader + 1) % cluster.nodes.length;
    const w = createClient({
      endpoints: [cluster.endpoints[f], ...cluster.endpoints.filter((_, i) => i !== f)],
      transport: nodeTransport({ keepAliveMs: 500 }),
    });
    const ac = new AbortController();
    try {
      const { it, first, at } = await openWatch(w.watch("ts/cut/", { signal: ac.signal }), "ts/cut/");
      await cluster.stop(f);
      const a = await client.tryLock("ts/cut/1", { ttlMs: 5000 });
      await a.release();
      await cluster.kill(f);
      const got = [await nextEvent(it, "the grant made while the node was stopped", first), await nextEvent(it, "the release")];
      assert.deepEqual(got.map((e) => [e.typeName, e.token]), [["GRANTED", a.token], ["RELEASED", a.token]]);
      assert.ok(got[0].index > at);
    } finally {
      ac.abort();
      await w.close();
      cluster.start(f);
      await cluster.leader();
    }
  });

  test("lease_lost_when_cluster_paused", async () => {
    const lease = await client.lock("ts/lost", { ttlMs: 400 });
    await cluster.pause();
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

  test("shared_holders", async () => {
    const ac = new AbortController();
    const { it, first } = await openWatch(client.watch("ts/s/", { signal: ac.signal }), "ts/s/");
    const a = await client.tryLock("ts/s/k", { ttlMs: 5000, shared: true });
    const b = await client.tryLock("ts/s/k", { ttlMs: 5000, mode: Mode.SHARED });
    assert.ok(b.token > a.token, "every holder gets its own, newer token");
    assert.equal(a.mode, Mode.SHARED);
    // An exclusive request is incompatible with shared holders.
    await assert.rejects(client.tryLock("ts/s/k", { ttlMs: 5000 }), LockedError);
    const info = await client.getLock("ts/s/k");
    assert.equal(info.held, true);
    assert.equal(info.mode, Mode.SHARED);
    assert.equal(info.token, 0n, "the singular fields are for exclusive locks only");
    assert.deepEqual(info.holders.map((h) => [h.token, h.owner, h.session]), [[a.token, a.owner, 0n], [b.token, b.owner, 0n]]);
    assert.ok(info.holders.every((h) => h.ttlMs === 5000 && h.remainingMs > 0));
    const listed = await client.listLocks("ts/s/");
    assert.deepEqual(listed.map((l) => [l.key, l.mode, l.holders.length]), [["ts/s/k", Mode.SHARED, 2]]);
    assert.deepEqual(await client.checkToken("ts/s/k", a.token), { valid: true, currentToken: b.token, mode: Mode.SHARED, limit: 0 });
    await a.release();
    assert.deepEqual((await client.getLock("ts/s/k")).holders.map((h) => h.token), [b.token]);
    assert.equal((await client.checkToken("ts/s/k", a.token)).valid, false);
    await b.release();
    const got = [await nextEvent(it, "the first grant", first)];
    for (let i = 1; i < 4; i++) got.push(await nextEvent(it, `change ${i}`));
    ac.abort();
    assert.deepEqual(got.map((e) => [e.typeName, e.token, e.mode]), [
      ["GRANTED", a.token, Mode.SHARED], ["GRANTED", b.token, Mode.SHARED],
      ["RELEASED", a.token, Mode.SHARED], ["RELEASED", b.token, Mode.SHARED],
    ]);
  });

  test("semaphore_limit_mismatch", async () => {
    const a = await client.tryLock("ts/sem", { ttlMs: 5000, limit: 2 });
    const b = await client.tryLock("ts/sem", { ttlMs: 5000, limit: 2 });
    await assert.rejects(client.tryLock("ts/sem", { ttlMs: 5000, limit: 2 }), LockedError, "a full semaphore");
    const err = await client.tryLock("ts/sem", { ttlMs: 5000, limit: 3 }).then(() => undefined, (e) => e);
    assert.ok(err instanceof LimitMismatchError, `got ${err}`);
    assert.ok(err instanceof FailedPreconditionError);
    assert.equal(err.code, Code.FailedPrecondition);
    assert.equal(err.limit, 2, "the key's current limit");
    const info = await client.getLock("ts/sem");
    assert.deepEqual([info.mode, info.limit, info.holders.map((h) => h.token)], [Mode.EXCLUSIVE, 2, [a.token, b.token]]);
    const c = await client.checkToken("ts/sem", a.token);
    assert.deepEqual([c.valid, c.limit], [true, 2]);
    await a.release();
    await b.release();
    // Free again: any limit goes.
    const d = await client.tryLock("ts/sem", { ttlMs: 5000, limit: 3 });
    await d.release();
  });

  test("session_two_locks_closed_in_one_step", async () => {
    // A TTL long enough that a KeepAlive (every ttl/3) answered late on a
    // starved machine still lands before the local deadline: 2 s of slack.
    const s = await client.createSession(3000);
    assert.ok(s.id > 0n);
    assert.equal(s.ttlMs, 3000);
    const ac = new AbortController();
    const { it, first } = await openWatch(client.watch("ts/sess/", { signal: ac.signal }), "ts/sess/");
    const a = await client.lock("ts/sess/a", { ttlMs: 0, session: s });
    const b = await client.lock("ts/sess/b", { ttlMs: 0, session: s.id, shared: true }); // by id
    assert.equal(a.session, s.id);
    assert.equal(b.session, s.id);
    assert.equal(a.ttlMs, 3000, "a lock under a session takes its TTL");
    // More than a TTL passes: the session keeps itself, and its locks, alive.
    await new Promise((r) => setTimeout(r, 4000));
    assert.equal(s.signal.aborted, false, `session lost: ${s.signal.reason}`);
    assert.equal(a.signal.aborted, false, `lease lost: ${a.signal.reason}`);
    const info = await client.getLock("ts/sess/a");
    assert.deepEqual(info.holders.map((h) => [h.token, h.session]), [[a.token, s.id]]);
    // The session's lease is the locks' lease: Renew is refused.
    await assert.rejects(client.renew("ts/sess/a", a.token), FailedPreconditionError);
    assert.equal(await client.keepAlive(s.id), 3000);
    await s.close();
    assert.ok(s.signal.reason instanceof ReleasedError);
    assert.ok(a.signal.reason instanceof ReleasedError, "a lease under a closed Session ends with it");
    assert.equal((await client.getLock("ts/sess/a")).held, false);
    assert.equal((await client.getLock("ts/sess/b")).held, false);
    const got = [await nextEvent(it, "the first grant", first)];
    for (let i = 1; i < 4; i++) got.push(await nextEvent(it, `change ${i}`));
    ac.abort();
    assert.deepEqual(got.map((e) => [e.typeName, e.key, e.token, e.session]), [
      ["GRANTED", "ts/sess/a", a.token, s.id], ["GRANTED", "ts/sess/b", b.token, s.id],
      ["RELEASED", "ts/sess/a", a.token, s.id], ["RELEASED", "ts/sess/b", b.token, s.id],
    ]);
    assert.equal(got[2].index, got[3].index, "both locks released by one entry");
    await assert.rejects(client.keepAlive(s.id), SessionNotFoundError);
    await assert.rejects(client.lock("ts/sess/c", { ttlMs: 0, session: s }), SessionNotFoundError);
    await assert.rejects(client.closeSession(s.id), SessionNotFoundError);
  });

  test("session_get_and_list", async () => {
    const s1 = await client.createSession(30000);
    const s2 = await client.createSession(20000);
    const a = await client.lock("ts/sl/jobs/a", { ttlMs: 0, session: s2 });
    const got = await client.getSession(s2.id);
    assert.equal(got.id, s2.id);
    assert.equal(got.ttlMs, 20000);
    assert.ok(got.remainingMs > 0 && got.remainingMs <= 20000, `remaining ${got.remainingMs}`);
    assert.equal(got.principal, "", "authorization is off");
    assert.deepEqual(got.locks.map((l) => [l.key, l.token, l.owner, l.mode, l.limit]), [["ts/sl/jobs/a", a.token, a.owner, Mode.EXCLUSIVE, 0]]);
    const ids = (await client.listSessions()).map((x) => x.id);
    assert.ok(ids.includes(s1.id) && ids.includes(s2.id), `${ids}`);
    assert.ok(ids.indexOf(s1.id) < ids.indexOf(s2.id), "ascending id order");
    assert.deepEqual((await client.listSessions({ keyPrefix: "ts/sl/jobs/" })).map((x) => x.id), [s2.id]);
    await s1.close();
    await s2.close();
    await assert.rejects(client.getSession(s2.id), SessionNotFoundError);
    assert.ok(!(await client.listSessions()).some((x) => x.id === s1.id || x.id === s2.id));
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
