// The client against sdk/testdata/client-spec.json, the behaviour it shares
// with the Go SDK (whose sdk/spec_internal_test.go checks that one against
// the same file): defaults, retry backoff, lease timing, and how each error
// a server or the network gives is handled. No cluster: errors come from an
// in-process HTTP/2 server over loopback, or are the network's own.
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import http2 from "node:http2";
import net from "node:net";
import { after, before, describe, test } from "node:test";
import { Code, ConnectError, createClient as createConnectClient } from "@connectrpc/connect";
import { connectNodeAdapter } from "@connectrpc/connect-node";
import { codeFromString } from "@connectrpc/connect/protocol-connect";
import {
  Client, FailedPreconditionError, InvalidArgumentError, LimitMismatchError, LockedError, NotHeldError,
  PermissionDeniedError, ResourceExhaustedError, SessionNotFoundError, TicketdError, UnauthenticatedError,
  UnavailableError, WatchOutOfRangeError,
} from "../dist/index.js";
import { nodeTransport } from "../dist/node.js";
import { defaults } from "../dist/defaults.js";
import { classify, leaderHint, wrapErr } from "../dist/errors.js";
import { renewAt } from "../dist/keeper.js";
import { LeaderHintSchema, LimitMismatchSchema, LockService, WatchOutOfRangeSchema } from "../dist/gen/ticket/v1/lock_pb.js";
import { fakeNodes, statusOf } from "./fakenodes.mjs";
import { FakeClock } from "./fakeclock.mjs";

const spec = JSON.parse(readFileSync(new URL("../../testdata/client-spec.json", import.meta.url), "utf8"));

/** The spec's error names as this package's classes. */
const errorClasses = {
  locked: LockedError,
  not_held: NotHeldError,
  session_not_found: SessionNotFoundError,
  limit_mismatch: LimitMismatchError,
  invalid_argument: InvalidArgumentError,
  resource_exhausted: ResourceExhaustedError,
  permission_denied: PermissionDeniedError,
  unauthenticated: UnauthenticatedError,
  unavailable: UnavailableError,
  failed_precondition: FailedPreconditionError,
  watch_out_of_range: WatchOutOfRangeError,
  other: TicketdError,
};

/** A client that makes no call: for reading its settings. */
function idleClient() {
  return new Client({ endpoints: ["127.0.0.1:1"], transport: fakeNodes({}).factory }, new FakeClock());
}

test("defaults_match_the_spec", () => {
  const want = { ...spec.defaults };
  delete want.backoffJitter; // prose: checked by backoff_rows_match_the_spec
  assert.deepEqual({ ...defaults }, want, "src/defaults.ts and sdk/testdata/client-spec.json differ");
  const c = idleClient();
  assert.equal(c.opts.requestTimeoutMs, spec.defaults.requestTimeoutMs);
  assert.equal(c.opts.backoffBaseMs, spec.defaults.backoffBaseMs);
  assert.equal(c.opts.backoffMaxMs, spec.defaults.backoffMaxMs);
  assert.equal(c.opts.driftRate, spec.defaults.driftRate);
  assert.equal(c.opts.minMarginMs, spec.defaults.minMarginMs);
});

test("owner_prefix_is_cut_as_the_spec_says", async () => {
  const owners = [];
  const node = "127.0.0.1:7001";
  const { factory } = fakeNodes({
    [node]: {
      cluster: { status: () => statusOf(node, node, [node]) },
      lock: {
        acquire: (req) => {
          owners.push(req.owner);
          return { token: 1n, leaseMs: req.leaseMs };
        },
      },
    },
  });
  const long = "p".repeat(spec.defaults.ownerPrefixMaxLength + 10);
  const c = new Client({ endpoints: [node], transport: factory, ownerPrefix: long }, new FakeClock());
  try {
    await c.acquire("k", { ttlMs: 1000 });
    assert.equal(owners.length, 1);
    assert.ok(owners[0].startsWith(long.slice(0, spec.defaults.ownerPrefixMaxLength) + "/"), owners[0]);
    assert.ok(!owners[0].startsWith(long.slice(0, spec.defaults.ownerPrefixMaxLength + 1)), owners[0]);
  } finally {
    await c.close();
  }
});

test("backoff_rows_match_the_spec", () => {
  const c = idleClient();
  for (const row of spec.backoff.rows) {
    const d = row.maxMs;
    let lo = Infinity;
    let hi = 0;
    for (let i = 0; i < 200; i++) {
      const got = c.retryDelay(undefined, row.attempt);
      lo = Math.min(lo, got);
      hi = Math.max(hi, got);
    }
    assert.ok(lo >= d / 2, `attempt ${row.attempt}: a delay of ${lo} ms, below d/2 = ${d / 2}`);
    assert.ok(hi <= d, `attempt ${row.attempt}: a delay of ${hi} ms, above d = ${d}`);
    // Equal jitter spreads the delays over [d/2, d].
    assert.ok(lo < (d * 3) / 4 && hi > (d * 3) / 4, `attempt ${row.attempt}: 200 delays within one half of [d/2, d]: ${lo}..${hi}`);
  }
});

test("lease_rows_match_the_spec", () => {
  const c = idleClient();
  const near = (got, want, what) => assert.ok(Math.abs(got - want) < 0.001, `${what}: ${got}, the spec says ${want}`);
  for (const row of spec.lease.rows) {
    near(renewAt(0, row.ttlMs), row.renewAtMs, `ttl ${row.ttlMs}: first renewal`);
    near(c.localDeadline(0, row.ttlMs), row.deadlineMs, `ttl ${row.ttlMs}: local deadline`);
    const call = { op: "renew", key: "k", toLeader: true, timeoutMs: c.opts.requestTimeoutMs };
    c.boundRenewal(call, row.ttlMs);
    near(call.timeoutMs, row.attemptTimeoutMs, `ttl ${row.ttlMs}: attempt timeout of a renewal`);
    near(c.retryCap(call.backoffMs), row.backoffCapMs, `ttl ${row.ttlMs}: backoff cap of a renewal`);
  }
});

/** serverError is the error a server sends for row. */
function serverError(row) {
  const details = [];
  if (row.leaderHint !== undefined) details.push({ desc: LeaderHintSchema, value: { leaderId: "n2", leaderAddr: row.leaderHint } });
  if (row.limitMismatch !== undefined) details.push({ desc: LimitMismatchSchema, value: { limit: row.limitMismatch } });
  if (row.watchOldestIndex !== undefined) details.push({ desc: WatchOutOfRangeSchema, value: { oldestIndex: BigInt(row.watchOldestIndex) } });
  return new ConnectError("from the client spec", codeFromString(row.code), undefined, details);
}

/** clientError is the error this client's own stack makes for row: a cut connection (what a reset stream or a timeout looks like). */
function clientError(row) {
  const cause = Object.assign(new Error("stream closed before the response ended"), { code: "ERR_HTTP2_STREAM_ERROR" });
  return new ConnectError(cause.message, codeFromString(row.code), undefined, undefined, cause);
}

/** checkRow checks how the client handles err, the failure of row. */
function checkRow(protocol, row, err) {
  const what = `${protocol} ${JSON.stringify(row)}`;
  const code = codeFromString(row.code);
  assert.notEqual(code, undefined, `${what}: unknown code`);
  assert.equal(code, row.grpc, `${what}: the gRPC number of ${row.code}`);
  assert.equal(ConnectError.from(err).code, code, `${what}: code (${err})`);
  assert.equal(classify(err), row.retry, `${what}: classify`);
  assert.equal(leaderHint(err), row.hint, `${what}: leaderHint`);
  const cls = errorClasses[row.error];
  assert.ok(cls, `${what}: unknown error name`);
  const w = wrapErr(row.op ?? "get", "k", err);
  assert.equal(w.constructor, cls, `${what}: ${w.constructor.name}, not ${cls.name}`);
  if (row.limitMismatch !== undefined) assert.equal(w.limit, row.limitMismatch, `${what}: the key's limit`);
  if (row.watchOldestIndex !== undefined) assert.equal(w.oldestIndex, BigInt(row.watchOldestIndex), `${what}: the oldest index`);
}

/** freePort returns a loopback port nothing listens on. */
async function freePort() {
  const s = net.createServer();
  await new Promise((res, rej) => s.listen(0, "127.0.0.1", res).on("error", rej));
  const { port } = s.address();
  await new Promise((res) => s.close(res));
  return port;
}

describe("classify_rows_match_the_spec", () => {
  const rows = spec.classify.rows;
  let server;
  let addr;
  const sessions = new Set();
  before(async () => {
    // Answers GetLock with the server error of the row whose index is the key.
    server = http2.createServer(connectNodeAdapter({
      routes: (router) => router.service(LockService, {
        getLock(req) {
          const row = rows[Number(req.key)];
          if (row === undefined) throw new ConnectError("no such row", Code.InvalidArgument);
          throw serverError(row);
        },
      }),
    }));
    server.on("session", (s) => sessions.add(s));
    await new Promise((res, rej) => server.listen(0, "127.0.0.1", res).on("error", rej));
    addr = `127.0.0.1:${server.address().port}`;
  });
  after(async () => {
    const closed = new Promise((res) => server.close(res));
    for (const s of sessions) s.destroy();
    await closed;
  });

  for (const protocol of ["connect", "grpc"]) {
    test(protocol, async () => {
      const factory = nodeTransport({ protocol });
      try {
        const lc = createConnectClient(LockService, factory(`http://${addr}`));
        const refused = createConnectClient(LockService, factory(`http://127.0.0.1:${await freePort()}`));
        for (const [i, row] of rows.entries()) {
          let err;
          if (row.transport === "connection_refused") {
            err = await refused.getLock({ key: "k" }, { signal: AbortSignal.timeout(10_000) }).then(() => assert.fail("answered"), (e) => e);
          } else if (row.from === "server") {
            err = await lc.getLock({ key: String(i) }, { signal: AbortSignal.timeout(10_000) }).then(() => assert.fail("answered"), (e) => e);
          } else {
            assert.equal(row.from, "client", `${JSON.stringify(row)}: from must be server or client`);
            err = clientError(row);
          }
          checkRow(protocol, row, err);
        }
      } finally {
        factory.close();
      }
    });
  }
});
