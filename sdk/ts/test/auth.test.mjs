// The client against a three-node cluster with authorization on (a tokens
// file of SHA-256 digests and a policy, docs/security.md): every call, Watch
// included, carries `Authorization: Bearer`, through a follower too; an
// admin force-releases another principal's lock.
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";
import {
  createClient, LockEventType, NotHeldError, PermissionDeniedError, UnauthenticatedError,
} from "../dist/index.js";
import { nodeTransport } from "../dist/node.js";
import { authArgs, tokens } from "./auth.mjs";
import { startCluster } from "./cluster.mjs";
import { openWatch, nextEvent } from "./bounded.mjs";

describe("client with authorization on", () => {
  let cluster;
  const clients = [];
  /** as returns a client sending principal's token (none: anonymous) to endpoints. */
  const as = (principal, endpoints = cluster.endpoints, extra = {}) => {
    const c = createClient({ endpoints, transport: nodeTransport(), bearerToken: tokens[principal], ...extra });
    clients.push(c);
    return c;
  };
  before(async () => {
    cluster = await startCluster({ args: (_nodes, dir) => ["--lease-min-ms", "100", ...authArgs(dir)], token: tokens.ops });
  });
  after(async () => {
    await Promise.all(clients.map((c) => c.close()));
    await cluster?.close();
  });

  test("anonymous_and_unknown_token_refused", async () => {
    await assert.rejects(as(undefined).tryLock("app/anon", { ttlMs: 5000 }), UnauthenticatedError);
    const wrong = createClient({ endpoints: cluster.endpoints, transport: nodeTransport(), bearerToken: "nope" });
    clients.push(wrong);
    await assert.rejects(wrong.status(), UnauthenticatedError);
  });

  test("every_call_through_a_follower_carries_the_token", async () => {
    const f = (await cluster.leader() + 1) % cluster.nodes.length;
    // followLeader false: every call goes to the follower, which forwards
    // writes and the watch's linearizable start to the leader.
    const app = as("app", [cluster.endpoints[f]], { followLeader: false });
    const ac = new AbortController();
    const { it, first } = await openWatch(app.watch("app/", { signal: ac.signal }), "app/");
    const lease = await app.tryLock("app/a", { ttlMs: 5000 });
    const ev = await nextEvent(it, "the grant", first);
    assert.equal(ev.type, LockEventType.GRANTED);
    assert.equal(ev.key, "app/a");
    assert.equal(ev.token, lease.token);
    assert.equal((await app.getLock("app/a")).held, true);
    assert.deepEqual((await app.listLocks("app/")).map((l) => l.key), ["app/a"]);
    assert.equal((await app.checkToken("app/a", lease.token)).valid, true);
    await app.renew("app/a", lease.token);
    assert.ok((await app.status()).nodeId !== "");
    await lease.release();
    const rest = [];
    for (let e = await nextEvent(it, "a change after the grant"); ; e = await nextEvent(it, "a change after the grant")) {
      rest.push(e.typeName);
      if (e.type === LockEventType.RELEASED) break;
    }
    assert.ok(rest.length >= 2 && rest.slice(0, -1).every((t) => t === "RENEWED"), `events after the grant: ${rest}`);
    ac.abort();
    await assert.rejects(app.tryLock("elsewhere/a", { ttlMs: 5000 }), PermissionDeniedError);
  });

  test("admin_force_releases_another_principals_lock", async () => {
    const app = as("app");
    const other = as("other");
    const admin = as("ops");
    const held = await app.acquire("app/f", { ttlMs: 60_000, wait: false });
    await assert.rejects(other.release("app/f", held.token), PermissionDeniedError);
    await assert.rejects(other.forceRelease("app/f"), PermissionDeniedError);
    assert.equal((await admin.getLock("app/f")).held, true, "refusals changed nothing");
    await admin.forceRelease("app/f");
    assert.equal((await admin.getLock("app/f")).held, false);
    await assert.rejects(admin.forceRelease("app/f"), NotHeldError);
  });
});
