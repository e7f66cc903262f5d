// A lease's renewals and local deadline (Keeper), to the millisecond, on a
// fake clock: a node below the client (an in-memory transport) grants and
// renews, or refuses, and the test moves time. No cluster, no waiting.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { afterEach, beforeEach, describe, test } from "node:test";
import { Code, ConnectError } from "@connectrpc/connect";
import { Client, LeaseLostError, NotHeldError } from "../dist/index.js";
import { FakeClock } from "./fakeclock.mjs";
import { fakeNodes, statusOf } from "./fakenodes.mjs";

const spec = JSON.parse(readFileSync(new URL("../../testdata/client-spec.json", import.meta.url), "utf8"));
// A lease of 3 s: renewed at 1000 ms, lost at 2950 ms without a renewal.
const row = spec.lease.rows.find((r) => r.ttlMs === 3000);

describe("keeper_on_a_fake_clock", () => {
  const node = "127.0.0.1:7001";
  let clock;
  let client;
  let renewals; // the fake clock's time at each Renew the node received
  let answer; // how the node answers Renew: "ok", "unavailable", "not_found"

  beforeEach(() => {
    clock = new FakeClock();
    renewals = [];
    answer = "ok";
    const { factory } = fakeNodes({
      [node]: {
        cluster: { status: () => statusOf(node, node, [node]) },
        lock: {
          acquire: (req) => ({ token: 7n, leaseMs: req.leaseMs }),
          renew: () => {
            renewals.push(clock.now());
            if (answer === "unavailable") throw new ConnectError("no leader", Code.Unavailable);
            if (answer === "not_found") throw new ConnectError("no such lock", Code.NotFound);
            return { leaseMs: BigInt(row.ttlMs) };
          },
          release: () => ({}),
        },
      },
    });
    client = new Client({ endpoints: [node], transport: factory }, clock);
  });
  afterEach(async () => {
    await client.close();
  });

  test("renews_at_a_third_and_moves_the_deadline", async () => {
    const lease = await client.tryLock("k", { ttlMs: row.ttlMs });
    assert.equal(lease.deadline, row.deadlineMs, "the local deadline of a grant sent at 0");
    await clock.advance(row.renewAtMs - 1);
    assert.deepEqual(renewals, [], "renewed before a third of the lease");
    await clock.advance(1);
    assert.deepEqual(renewals, [row.renewAtMs], "the renewal is sent at a third of the lease");
    assert.equal(lease.deadline, row.renewAtMs + row.deadlineMs, "the deadline counts from the renewal's send time");
    await clock.advance(row.renewAtMs);
    assert.deepEqual(renewals, [row.renewAtMs, 2 * row.renewAtMs], "the next renewal a third after the last one's send time");
    assert.equal(lease.signal.aborted, false);
  });

  test("lost_at_the_local_deadline_not_before", async () => {
    const lease = await client.tryLock("k", { ttlMs: row.ttlMs });
    answer = "unavailable"; // every renewal fails, and is retried until the deadline
    await clock.advance(row.deadlineMs - 1);
    assert.ok(renewals.length > 1, `the failed renewal was retried: ${renewals}`);
    assert.equal(lease.signal.aborted, false, `lost before the local deadline: ${lease.signal.reason}`);
    await clock.advance(1);
    assert.equal(lease.signal.aborted, true, "not lost at the local deadline");
    assert.ok(lease.signal.reason instanceof LeaseLostError, String(lease.signal.reason));
    const retries = renewals.length;
    await clock.advance(row.ttlMs);
    assert.equal(renewals.length, retries, "renewals went on after the lease was lost");
  });

  test("a_refused_renewal_ends_the_lease_at_once", async () => {
    const lease = await client.tryLock("k", { ttlMs: row.ttlMs });
    answer = "not_found";
    await clock.advance(row.renewAtMs);
    assert.deepEqual(renewals, [row.renewAtMs], "a refusal is not retried");
    assert.equal(lease.signal.aborted, true);
    assert.ok(lease.signal.reason instanceof LeaseLostError, String(lease.signal.reason));
    assert.ok(lease.signal.reason.cause instanceof NotHeldError, String(lease.signal.reason.cause));
  });

  test("a_late_grant_is_measured_afresh", async () => {
    // A grant that arrives more than a third of its lease after it was
    // sent is renewed at once, and the lease counts from that renewal.
    let grant;
    const pending = new Promise((resolve) => (grant = resolve));
    const slow = fakeNodes({
      [node]: {
        cluster: { status: () => statusOf(node, node, [node]) },
        lock: {
          acquire: async (req) => {
            await pending;
            return { token: 7n, leaseMs: req.leaseMs };
          },
          renew: () => {
            renewals.push(clock.now());
            return { leaseMs: BigInt(row.ttlMs) };
          },
        },
      },
    });
    const c = new Client({ endpoints: [node], transport: slow.factory }, clock);
    try {
      const locking = c.lock("k", { ttlMs: row.ttlMs });
      await clock.advance(row.renewAtMs + 1);
      grant();
      const lease = await locking;
      assert.deepEqual(renewals, [row.renewAtMs + 1]);
      assert.equal(lease.deadline, row.renewAtMs + 1 + row.deadlineMs);
    } finally {
      await c.close();
    }
  });
});
