// Leader hints (the LeaderHint detail a follower attaches to Unavailable):
// followed at once to a node a configured endpoint vouches for, never to
// another address, and only a few times per call without a backoff. Nodes
// below the client are in-memory transports; time is a fake clock that
// stands still, so "at once" means "with no time passing".
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { Client } from "../dist/index.js";
import { LeaderHintSchema } from "../dist/gen/ticket/v1/lock_pb.js";
import { FakeClock, settle } from "./fakeclock.mjs";
import { fakeNodes, statusOf } from "./fakenodes.mjs";

const spec = JSON.parse(readFileSync(new URL("../../testdata/client-spec.json", import.meta.url), "utf8"));

const a = "127.0.0.1:7001";
const b = "127.0.0.1:7002";
const c = "127.0.0.1:7003";

/** notLeader is a follower's answer naming leader. */
function notLeader(leader) {
  return new ConnectError("not leader", Code.Unavailable, undefined, [{ desc: LeaderHintSchema, value: { leaderId: "n", leaderAddr: leader } }]);
}

const grant = (req) => ({ token: 1n, leaseMs: req.leaseMs });

/**
 * settled reports whether promise is done once the work that needs no
 * time has run (the fake clock stands still: a backoff never ends).
 */
async function settled(promise) {
  let done = false;
  promise.then(() => (done = true), () => (done = true));
  for (let i = 0; i < 20 && !done; i++) await settle();
  return done;
}

test("hint_to_a_member_is_followed_at_once", async () => {
  // Only a is configured; its Status lists b as a member and names no
  // leader (an election under way), its Acquire names b.
  const nodes = fakeNodes({
    [a]: { cluster: { status: () => statusOf(a, "", [a, b, c]) }, lock: { acquire: () => Promise.reject(notLeader(b)) } },
    [b]: { lock: { acquire: grant } },
  });
  const clock = new FakeClock();
  const client = new Client({ endpoints: [a], transport: nodes.factory }, clock);
  try {
    const acquiring = client.acquire("k", { ttlMs: 1000 });
    assert.equal(await settled(acquiring), true, "the hint was not followed at once (no time passed)");
    assert.equal((await acquiring).token, 1n);
    assert.deepEqual(nodes.calls, [`${a} status`, `${a} acquire`, `${b} acquire`]);
    assert.equal(client.leader, `http://${b}`);
  } finally {
    await client.close();
  }
});

test("hint_to_an_unknown_address_is_not_followed", async () => {
  // A node that names an address no configured endpoint lists as a member:
  // misconfigured or compromised. The client keeps to its endpoints.
  const evil = "10.9.9.9:7001";
  const nodes = fakeNodes({
    [a]: { cluster: { status: () => statusOf(a, evil, [a]) }, lock: { acquire: () => Promise.reject(notLeader(evil)) } },
  });
  const clock = new FakeClock();
  const client = new Client({ endpoints: [a], transport: nodes.factory }, clock);
  const stop = new AbortController();
  try {
    const acquiring = client.acquire("k", { ttlMs: 1000, signal: stop.signal });
    acquiring.catch(() => {});
    await clock.advance(1000); // many retries, with backoff
    assert.ok(nodes.calls.filter((x) => x === `${a} acquire`).length > 1, `not retried: ${nodes.calls}`);
    assert.deepEqual(nodes.urls, [`http://${a}`], "the client made a transport for an address no endpoint vouches for");
    assert.equal(client.leader, "");
    stop.abort();
    await assert.rejects(acquiring);
  } finally {
    await client.close();
  }
});

test("quick_retries_after_hints_are_bounded", async () => {
  // a and b name each other (a stale view during an election): each hint
  // names a new leader, and only leaderHintQuickRetries of them are
  // followed without a backoff.
  const nodes = fakeNodes({
    [a]: { cluster: { status: () => statusOf(a, "", [a, b]) }, lock: { acquire: () => Promise.reject(notLeader(b)) } },
    [b]: { cluster: { status: () => statusOf(b, "", [a, b]) }, lock: { acquire: () => Promise.reject(notLeader(a)) } },
  });
  const clock = new FakeClock();
  const client = new Client({ endpoints: [a, b], transport: nodes.factory }, clock);
  const stop = new AbortController();
  try {
    const acquiring = client.acquire("k", { ttlMs: 1000, signal: stop.signal });
    acquiring.catch(() => {});
    assert.equal(await settled(acquiring), false);
    const acquires = nodes.calls.filter((x) => x.endsWith(" acquire"));
    assert.equal(acquires.length, 1 + spec.defaults.leaderHintQuickRetries, `attempts with no time passing: ${acquires}`);
    await clock.advance(spec.defaults.backoffMaxMs);
    assert.ok(nodes.calls.filter((x) => x.endsWith(" acquire")).length > acquires.length, "no retry after the backoff");
    stop.abort();
    await assert.rejects(acquiring);
  } finally {
    await client.close();
  }
});
