// The ticketd web console (served at /ui/ by every node, from
// server/console): members with leader, term and indexes, the holders of
// the keys under a prefix — one row per holder (key and token: a shared key
// or a semaphore has several), with its mode (exclusive, shared, semaphore
// N), its session when it has one, and a live remaining-lease bar kept up to
// date by Watch — recent events, and release for an admin: a holder's own
// release button (with its token), and force release of a key, every holder
// whoever holds it (ReleaseRequest.force; admin). The bearer token typed in the header is kept in sessionStorage
// (this tab only) and sent with every call, Watch included. It talks only to the node that served
// it (followLeader: false: that node forwards writes to the leader), plus
// each member's Status when that member allows this origin (CORS).
import { createClient, LockEventType, Mode, WatchOutOfRangeError } from "../src/index.js";
import type { LockEvent, StatusResponse } from "../src/index.js";
import { webTransport } from "../src/web.js";

/** One holder of a key as the console tracks it; deadline is a performance.now() time. */
interface Row {
  key: string;
  token: bigint;
  owner: string;
  leaseMs: number;
  deadline: number;
  tr: HTMLTableRowElement;
}

/** What the console shows of a holder besides its lease: how its key is held, and its session. */
interface Kind {
  mode: Mode;
  limit: number;
  session: bigint;
}

const $ = <T extends HTMLElement>(id: string) => document.getElementById(id) as T;
const tokenInput = $<HTMLInputElement>("token");
const prefixInput = $<HTMLInputElement>("prefix");
tokenInput.value = sessionStorage.getItem("ticketd.token") ?? "";
prefixInput.value = new URLSearchParams(location.search).get("prefix") ?? "";

const client = createClient({
  endpoints: [location.origin],
  transport: webTransport(),
  followLeader: false,
  bearerToken: () => tokenInput.value.trim() || undefined,
});

/** rows holds one Row per holder, by rowId(key, token). */
const rows = new Map<string, Row>();

function rowId(key: string, token: bigint): string {
  return `${key}\u0000${token}`;
}

/** modeText names how a key is held: "exclusive", "shared" or "semaphore N". */
function modeText(mode: Mode, limit: number): string {
  if (limit > 0) return `semaphore ${limit}`;
  return mode === Mode.SHARED ? "shared" : "exclusive";
}
let watchAbort = new AbortController();

function el(tag: string, text = "", cls = ""): HTMLElement {
  const e = document.createElement(tag);
  e.textContent = text;
  if (cls) e.className = cls;
  return e;
}

function showError(msg: string): void {
  $("error").textContent = msg;
}

// ---- members ----

async function memberStatus(apiAddr: string, self: StatusResponse): Promise<StatusResponse | undefined> {
  if (apiAddr === "" || apiAddr === location.host) return self;
  try {
    return await client.nodeStatus(`${location.protocol}//${apiAddr}`);
  } catch {
    return undefined;
  }
}

async function refreshMembers(): Promise<void> {
  let self: StatusResponse;
  try {
    self = await client.nodeStatus(location.origin);
  } catch (err) {
    $("node").textContent = "unreachable";
    showError(String((err as Error).message));
    return;
  }
  $("node").textContent = `node ${self.nodeId} · ${self.backend} · last token ${self.lastToken}`;
  const members = self.members.length > 0 ? self.members : [{ id: self.nodeId, apiAddr: location.host, voter: true, raftAddr: "" }];
  const sts = await Promise.all(members.map((m) => memberStatus(m.apiAddr, self)));
  const body = document.querySelector("#members tbody")!;
  body.replaceChildren(
    ...members.map((m, i) => {
      const st = sts[i];
      const tr = document.createElement("tr");
      tr.dataset.id = m.id;
      const role = el("span", m.id === self.leaderId ? "leader" : m.voter ? "follower" : "non-voter", "badge");
      if (m.id === self.leaderId) role.classList.add("leader");
      const roleTd = el("td");
      roleTd.append(role);
      let health = el("td", "unreachable", "bad");
      if (st) health = st.replaying ? el("td", "replaying", "warn") : st.leaderId === "" ? el("td", "no leader", "warn") : el("td", "serving", "ok");
      tr.append(
        el("td", m.id),
        roleTd,
        el("td", st ? String(st.term) : "–", "num"),
        el("td", st ? String(st.commitIndex) : "–", "num"),
        el("td", st ? String(st.appliedIndex) : "–", "num"),
        health,
        el("td", m.apiAddr),
      );
      return tr;
    }),
  );
}

// ---- locks ----

/**
 * upsert adds or updates the row of the holder (key, token). kind is known
 * from a listing or a GRANTED event; a RENEWED event carries none and keeps
 * the row's.
 */
function upsert(key: string, token: bigint, owner: string, leaseMs: number, remainingMs: number, kind?: Kind): void {
  const id = rowId(key, token);
  let r = rows.get(id);
  if (r === undefined) {
    const tr = document.createElement("tr");
    tr.dataset.key = key;
    tr.dataset.token = String(token);
    const bar = el("span", "", "bar");
    bar.append(el("span"));
    const leaseTd = el("td");
    leaseTd.append(bar, el("span", "", "left"));
    const btn = el("button", "Release") as HTMLButtonElement;
    btn.type = "button";
    btn.addEventListener("click", () => void releaseLock(key, token, btn));
    const btnTd = el("td");
    btnTd.append(btn);
    tr.append(
      el("td", key, "key"), el("td", "exclusive", "mode"), el("td", owner, "owner"), el("td", String(token), "num token"),
      el("td", "", "num session"), leaseTd, btnTd,
    );
    r = { key, token, owner, leaseMs, deadline: 0, tr };
    rows.set(id, r);
    insertSorted(r);
  }
  if (owner !== "") {
    r.owner = owner;
    r.tr.querySelector(".owner")!.textContent = owner;
  }
  if (kind !== undefined) {
    r.tr.dataset.mode = kind.limit > 0 ? "semaphore" : kind.mode === Mode.SHARED ? "shared" : "exclusive";
    r.tr.querySelector(".mode")!.textContent = modeText(kind.mode, kind.limit);
    r.tr.querySelector(".session")!.textContent = kind.session !== 0n ? String(kind.session) : "";
  }
  r.leaseMs = leaseMs;
  r.deadline = performance.now() + remainingMs;
  $("nolocks").hidden = true;
  $("lockcount").textContent = `(${rows.size})`;
}

/** before orders rows by key, then token. */
function before(a: Row, b: Row): boolean {
  return a.key < b.key || (a.key === b.key && a.token < b.token);
}

/** insertSorted puts r's row before the first row that sorts after it. */
function insertSorted(r: Row): void {
  const body = document.querySelector("#locks tbody")!;
  let next: Row | undefined;
  for (const o of rows.values()) if (o !== r && before(r, o) && (next === undefined || before(o, next))) next = o;
  body.insertBefore(r.tr, next ? next.tr : null);
}

/** remove drops the row of the holder (key, token), if shown. */
function remove(key: string, token: bigint): void {
  const id = rowId(key, token);
  const r = rows.get(id);
  if (r === undefined) return;
  r.tr.remove();
  rows.delete(id);
  $("nolocks").hidden = rows.size > 0;
  $("lockcount").textContent = rows.size > 0 ? `(${rows.size})` : "";
}

async function releaseLock(key: string, token: bigint, btn: HTMLButtonElement): Promise<void> {
  btn.disabled = true;
  try {
    await client.release(key, token);
    showError("");
  } catch (err) {
    showError(`release ${key}: ${(err as Error).message}`);
    btn.disabled = false;
  }
}

async function forceRelease(): Promise<void> {
  const input = $<HTMLInputElement>("forcekey");
  const btn = $("force").querySelector("button") as HTMLButtonElement;
  const key = input.value.trim();
  if (key === "") return;
  btn.disabled = true;
  try {
    await client.forceRelease(key);
    input.value = "";
    showError("");
  } catch (err) {
    showError(`force release ${key}: ${(err as Error).message}`);
  } finally {
    btn.disabled = false;
  }
}

function tick(): void {
  const t = performance.now();
  for (const r of rows.values()) {
    const left = Math.max(0, r.deadline - t);
    const frac = r.leaseMs > 0 ? Math.min(1, left / r.leaseMs) : 0;
    const bar = r.tr.querySelector(".bar") as HTMLElement;
    (bar.firstElementChild as HTMLElement).style.width = `${(frac * 100).toFixed(1)}%`;
    bar.classList.toggle("low", frac < 0.25);
    r.tr.querySelector(".left")!.textContent = `${(left / 1000).toFixed(1)} s`;
  }
  requestAnimationFrame(tick);
}

// ---- events ----

function logEvent(e: LockEvent): void {
  const li = el("li");
  li.dataset.type = e.typeName;
  li.dataset.key = e.key;
  li.append(
    el("span", new Date().toLocaleTimeString(), "t"),
    el("span", e.typeName, e.typeName),
    el("span", e.key),
    el("span", `token ${e.token}`),
    ...(e.session !== 0n ? [el("span", `session ${e.session}`)] : []),
    el("span", `index ${e.index}`, "t"),
  );
  const list = $("events");
  list.prepend(li);
  while (list.children.length > 50) list.lastElementChild!.remove();
}

/**
 * refreshRemaining updates the rows' remaining leases from a linearizable
 * list (the node forwards it to the leader, whose lessor knows them; a
 * follower answers -1). Renewals that Watch does not stream (a session's
 * KeepAlive renews its holders without events) are seen so.
 */
async function refreshRemaining(prefix: string, signal: AbortSignal): Promise<void> {
  while (!signal.aborted) {
    try {
      for (const l of await client.listLocks(prefix, { signal })) {
        for (const h of l.holders) {
          const r = rows.get(rowId(l.key, h.token));
          if (r !== undefined && h.remainingMs >= 0) {
            r.leaseMs = h.ttlMs;
            r.deadline = performance.now() + h.remainingMs;
          }
        }
      }
    } catch {
      // The members table shows why; try again on the next round.
    }
    await new Promise((res) => setTimeout(res, 1000));
  }
}

async function follow(prefix: string, signal: AbortSignal): Promise<void> {
  void refreshRemaining(prefix, signal);
  for (;;) {
    const listed = await client.listLocks(prefix, { signal });
    for (const r of [...rows.values()]) remove(r.key, r.token);
    for (const l of listed) {
      for (const h of l.holders) {
        upsert(l.key, h.token, h.owner, h.ttlMs, h.remainingMs >= 0 ? h.remainingMs : h.ttlMs, { mode: l.mode, limit: l.limit, session: h.session });
      }
    }
    $("nolocks").hidden = rows.size > 0;
    const live = $("live");
    live.textContent = "";
    delete live.dataset.started;
    try {
      // From the listing's read index: no change between the two is missed.
      const w = client.watch(prefix, { startIndex: listed.readIndex + 1n, signal });
      w.started.then((i) => {
        // The server announced the start: every change after index i follows.
        live.textContent = `live after index ${i}`;
        live.dataset.started = String(i);
      }, () => {});
      for await (const e of w) {
        logEvent(e);
        switch (e.type) {
          case LockEventType.GRANTED:
            upsert(e.key, e.token, e.owner, e.leaseMs, e.leaseMs, { mode: e.mode, limit: e.limit, session: e.session });
            break;
          case LockEventType.RENEWED:
            upsert(e.key, e.token, e.owner, e.leaseMs, e.leaseMs);
            break;
          case LockEventType.RELEASED:
          case LockEventType.EXPIRED:
            remove(e.key, e.token);
            break;
        }
      }
      return;
    } catch (err) {
      if (!(err instanceof WatchOutOfRangeError)) throw err;
      // History moved past us: list again and watch from there.
    }
  }
}

function restart(): void {
  watchAbort.abort();
  watchAbort = new AbortController();
  const signal = watchAbort.signal;
  follow(prefixInput.value, signal).catch((err) => {
    if (!signal.aborted) showError(`watch: ${(err as Error).message}`);
  });
}

let typing: ReturnType<typeof setTimeout> | undefined;
prefixInput.addEventListener("input", () => {
  clearTimeout(typing);
  typing = setTimeout(() => {
    const u = new URL(location.href);
    if (prefixInput.value) u.searchParams.set("prefix", prefixInput.value);
    else u.searchParams.delete("prefix");
    history.replaceState(null, "", u);
    restart();
  }, 300);
});
tokenInput.addEventListener("change", () => {
  sessionStorage.setItem("ticketd.token", tokenInput.value);
  restart(); // the watch and the listing again, as the new principal
  void refreshMembers();
});
$("controls").addEventListener("submit", (e) => e.preventDefault());
$("force").addEventListener("submit", (e) => {
  e.preventDefault();
  void forceRelease();
});

void refreshMembers();
setInterval(() => void refreshMembers(), 1000);
restart();
requestAnimationFrame(tick);
