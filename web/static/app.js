// The demo page: draws both peers' memory, completion queues and the
// segment ladder, and drives the browser peer (iwarp.wasm, globalThis
// iwarpPeer) over an RTCDataChannel to the Go peer or to another tab.
// Events from both peers are queued as they arrive and drawn once per
// animation frame, so thousands of placements a second cost one redraw
// per frame.
"use strict";

const $ = (id) => document.getElementById(id);
const hex = (n, w = 8) => "0x" + Number(n).toString(16).padStart(w, "0");
const LADDER_MAX = 300;
const CQ_MAX = 50;
const HIT_MS = 1500;

const S = {
  ws: null, myId: 0, tabs: [],
  pc: null, mode: null, remoteId: 0, connected: false, terminated: false,
  wasmReady: false,
  local: { regions: [], cqNew: [], el: "local" },
  remote: { regions: [], cqNew: [], el: "remote" },
  remoteQueue: [],       // batches from the remote peer, drawn next frame
  relayQueue: [],        // this tab's events for a paired tab
  relayRegions: null,
  lastRelay: 0,
  ladder: [], selected: null, seq: 0,
  hits: new Map(),       // cell element -> expiry time
  burst: null,           // a burst of Writes being posted, a few per frame
  placedAt: { local: [], remote: [] }, // placement times in the last second
  placedTotal: { local: 0, remote: 0 },
  lastRate: 0,
  // Observe mode: tabs watching this one, and the tab this one watches.
  observers: 0, observing: 0, observeQueue: [],
  report: null, reportFull: false, lastReport: 0,
};

function emptyReport() {
  return { local: { events: [], regions: null }, remote: { events: [], regions: null } };
}
S.report = emptyReport();
const reportKinds = new Set(["segment-sent", "segment-placed", "completion", "terminate"]);

// ---------- log and status ----------

function log(text, cls) {
  const li = document.createElement("li");
  li.textContent = new Date().toLocaleTimeString() + "  " + text;
  if (cls) li.className = cls;
  const ol = $("log");
  ol.prepend(li);
  while (ol.children.length > 100) ol.lastChild.remove();
}

function setStatus(kind, text) {
  const el = $("status");
  el.className = "status status-" + kind;
  el.textContent = text;
  const busy = kind === "connecting";
  $("connect-go").disabled = busy || !S.wasmReady;
  $("connect-tab").disabled = busy || !S.wasmReady || !$("tabs").value;
  $("observe-tab").disabled = busy || !$("tabs").value;
  $("disconnect").disabled = !S.pc && !S.observing;
}

// ---------- signaling ----------

function openSignaling() {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
  const ws = new WebSocket(url);
  S.ws = ws;
  ws.onmessage = (e) => onSignal(JSON.parse(e.data));
  ws.onclose = () => {
    log("Signaling connection closed; reconnecting in 2 s", "err");
    setTimeout(openSignaling, 2000);
  };
}

function signal(m) {
  if (S.ws && S.ws.readyState === WebSocket.OPEN) S.ws.send(JSON.stringify(m));
}

function onSignal(m) {
  switch (m.type) {
    case "welcome":
      S.myId = m.id;
      document.title = "iwarp demo (tab " + m.id + ")";
      log("Signaling connected; this is tab " + m.id);
      break;
    case "peers":
      S.tabs = (m.peers || []).filter((id) => id !== S.myId).sort((a, b) => a - b);
      fillTabs();
      break;
    case "answer":
      if (S.pc) S.pc.setRemoteDescription({ type: "answer", sdp: m.sdp })
        .catch((e) => fail("the answer: " + e.message));
      break;
    case "offer": // another tab pairs with this one: answer, as the passive side
      acceptTab(m).catch((e) => fail("pairing: " + e.message));
      break;
    case "relay":
      if (m.from === S.remoteId && m.body) S.remoteQueue.push(m.body);
      break;
    case "go-state":
    case "go-events":
      if (S.mode === "go") S.remoteQueue.push({ events: m.events || [], regions: m.regions });
      break;
    case "observers":
      S.observers = m.len || 0;
      S.reportFull = true;
      if (S.observers) log(S.observers + " tab(s) observing this one");
      break;
    case "report":
      if (S.mode === "observe" && m.from === S.observing && m.body) S.observeQueue.push(m.body);
      break;
    case "go-log":
      log(m.text);
      break;
    case "error":
      log((m.op ? m.op + ": " : "") + m.text, "err");
      break;
  }
}

function fillTabs() {
  const sel = $("tabs");
  const v = sel.value;
  sel.textContent = "";
  if (S.tabs.length === 0) sel.append(new Option("(no other tab open)", ""));
  for (const id of S.tabs) sel.append(new Option("tab " + id, String(id)));
  if (S.tabs.includes(Number(v))) sel.value = v;
  $("connect-tab").disabled = !S.wasmReady || !sel.value;
  $("observe-tab").disabled = !sel.value;
}

// ---------- connecting ----------

function newPeerConnection(passive, mulpdu) {
  hangup(false);
  setObserving(0);
  S.terminated = false;
  $("terminate").hidden = true;
  const pc = new RTCPeerConnection({ iceServers: [] });
  S.pc = pc;
  const ordered = !$("unordered").checked;
  const dc = pc.createDataChannel("iwarp-ddp", { negotiated: true, id: 1, protocol: "iwarp-ddp", ordered });
  mulpdu = mulpdu || Number($("mulpdu").value);
  const r = iwarpPeer.connect(dc, { mulpdu, passive }, (err) => {
    if (err) return fail("the DDP Stream Session: " + err);
    S.connected = true;
    setupLocalMemory();
    const who = S.mode === "go" ? "the Go peer" : "tab " + S.remoteId;
    setStatus("ok", "Connected to " + who + " (MULPDU " + mulpdu + ", this tab sends " +
      (ordered ? "ordered" : "unordered") + ")");
    log("DDP Stream Session up with " + who);
  });
  if (r.error) throw new Error(r.error);
  pc.onconnectionstatechange = () => {
    if (pc !== S.pc) return;
    if (pc.connectionState === "failed" || pc.connectionState === "closed") {
      fail("the WebRTC connection " + pc.connectionState);
    }
  };
  return { pc, mulpdu };
}

function iceGathered(pc) {
  if (pc.iceGatheringState === "complete") return Promise.resolve();
  return new Promise((resolve) => {
    const t = setTimeout(resolve, 3000);
    pc.addEventListener("icegatheringstatechange", () => {
      if (pc.iceGatheringState === "complete") { clearTimeout(t); resolve(); }
    });
  });
}

async function connectGo() {
  resetViews("Go peer (pion/webrtc, native)");
  S.mode = "go"; S.remoteId = 0;
  setStatus("connecting", "Connecting to the Go peer…");
  const { pc, mulpdu } = newPeerConnection(false);
  await pc.setLocalDescription(await pc.createOffer());
  await iceGathered(pc);
  signal({ type: "offer", sdp: pc.localDescription.sdp, mulpdu });
}

async function connectTab() {
  const to = Number($("tabs").value);
  if (!to) return;
  resetViews("tab " + to + " (browser peer)");
  S.mode = "tab"; S.remoteId = to;
  setStatus("connecting", "Pairing with tab " + to + "…");
  const { pc } = newPeerConnection(false);
  await pc.setLocalDescription(await pc.createOffer());
  await iceGathered(pc);
  signal({ type: "offer", to, sdp: pc.localDescription.sdp, mulpdu: Number($("mulpdu").value) });
}

async function acceptTab(m) {
  if (!S.wasmReady) return;
  resetViews("tab " + m.from + " (browser peer)");
  S.mode = "tab"; S.remoteId = m.from;
  setStatus("connecting", "Tab " + m.from + " is pairing with this tab…");
  log("Tab " + m.from + " asked to pair; accepting");
  const { pc } = newPeerConnection(true, m.mulpdu);
  await pc.setRemoteDescription({ type: "offer", sdp: m.sdp });
  await pc.setLocalDescription(await pc.createAnswer());
  await iceGathered(pc);
  signal({ type: "answer", to: m.from, sdp: pc.localDescription.sdp });
}

// setObserving(id) watches tab id read-only (0: stop watching).
function setObserving(id) {
  if (S.observing && !id) signal({ type: "observe", to: 0 });
  S.observing = id;
  S.observeQueue = [];
  for (const f of document.querySelectorAll("#controls fieldset")) f.disabled = !!id;
  if (!id) fillStagSelects();
}

function observeTab() {
  const id = Number($("tabs").value);
  if (!id) return;
  hangup(true);
  resetViews("the peer of tab " + id);
  $("local-sub").textContent = "(tab " + id + ", observed)";
  S.mode = "observe";
  setObserving(id);
  signal({ type: "observe", to: id });
  setStatus("ok", "Observing tab " + id + " (read-only)");
  log("Observing tab " + id + ": its memory is drawn on the left, its peer's on the right");
}

function hangup(tell) {
  if (S.pc) {
    if (tell && S.mode === "go") signal({ type: "hangup" });
    iwarpPeer.close();
    S.pc.close();
    S.pc = null;
  }
  S.connected = false;
}

function fail(why) {
  log("Error: " + why, "err");
  if (!S.terminated) setStatus("err", "Error: " + why);
}

function resetViews(remoteName) {
  S.local.regions = []; S.remote.regions = [];
  S.local.cqNew = []; S.remote.cqNew = [];
  S.remoteQueue = []; S.relayQueue = []; S.ladder = []; S.selected = null;
  $("ladder").textContent = "";
  $("local-cq").textContent = ""; $("remote-cq").textContent = "";
  $("detail").innerHTML = '<p class="hint">No segment selected.</p>';
  $("remote-sub").textContent = "(" + remoteName + ")";
  $("local-sub").textContent = "(browser peer, WebAssembly)";
  drawRegions(S.local); drawRegions(S.remote);
  fillStagSelects();
}

// The browser peer's memory: a region the peer may write and read, a
// sink for RDMA Reads, and two receive buffers for Sends.
function setupLocalMemory() {
  check(iwarpPeer.register("Tab memory", 256, 0x2000, "rwl"), "register");
  check(iwarpPeer.register("Read sink", 64, 0, "l"), "register");
  check(iwarpPeer.postRecv(64), "post receive");
  check(iwarpPeer.postRecv(64), "post receive");
}

function check(r, what) {
  if (r && r.error) { log(what + ": " + r.error, "err"); return null; }
  return r;
}

// ---------- drawing ----------

function b64bytes(s) {
  if (!s) return new Uint8Array(0);
  const bin = atob(s);
  const b = new Uint8Array(bin.length);
  for (let i = 0; i < bin.length; i++) b[i] = bin.charCodeAt(i);
  return b;
}

function cellText(v) {
  return v >= 0x21 && v <= 0x7e ? String.fromCharCode(v) : v === 0 ? "·" : v === 0x20 ? "␣" : v.toString(16).padStart(2, "0");
}

function accessWords(r) {
  return r.access || "local read only";
}

// drawRegions rebuilds a peer's region list when the set changed and
// otherwise updates the cells in place.
function drawRegions(side) {
  const box = $(side.el + "-regions");
  const key = side.regions.map((r) => r.stag + ":" + r.len).join(",");
  if (box.dataset.key !== key) {
    box.dataset.key = key;
    box.textContent = "";
    if (side.regions.length === 0) {
      const p = document.createElement("p");
      p.className = "empty";
      p.textContent = S.connected || side === S.remote ? "No regions." : "Connect to see this peer's memory.";
      box.append(p);
    }
    for (const r of side.regions) box.append(regionElement(side, r));
  }
  for (const r of side.regions) updateRegion(side, r);
}

function regionElement(side, r) {
  const div = document.createElement("div");
  div.className = "region";
  div.dataset.stag = r.stag;
  div.dataset.name = r.name;
  const h = document.createElement("h4");
  div.append(h);
  const meta = document.createElement("p");
  meta.className = "meta";
  div.append(meta);
  const grid = document.createElement("div");
  grid.className = "grid";
  grid.setAttribute("role", "img");
  for (let i = 0; i < r.len; i++) {
    const c = document.createElement("span");
    c.className = "cell";
    c.dataset.off = i;
    grid.append(c);
  }
  div.append(grid);
  const text = document.createElement("p");
  text.className = "textview";
  div.append(text);
  return div;
}

function updateRegion(side, r) {
  const div = document.querySelector("#" + side.el + "-regions .region[data-stag='" + r.stag + "']");
  if (!div) return;
  const kind = r.recv ? "Receive buffer for MSN " + r.msn : r.name;
  div.querySelector("h4").textContent = kind;
  div.classList.toggle("invalid", !r.valid);
  div.classList.toggle("recv", !!r.recv);
  div.classList.toggle("filled", !!r.filled);
  const state = !r.valid ? "INVALID (STag no longer usable)" : r.recv ? (r.filled ? "filled by a Send" : "posted, waiting for a Send") : "valid";
  div.querySelector(".meta").textContent =
    "STag " + hex(r.stag) + " · base TO " + hex(r.base, 4) + " · " + r.len + " octets · rights: " + accessWords(r) + " · " + state;
  const data = b64bytes(r.data);
  const cells = div.querySelector(".grid").children;
  let txt = "";
  for (let i = 0; i < cells.length; i++) {
    const v = data[i] || 0;
    const t = cellText(v);
    if (cells[i].textContent !== t) cells[i].textContent = t;
    cells[i].classList.toggle("set", v !== 0);
    txt += v >= 0x20 && v <= 0x7e ? String.fromCharCode(v) : v === 0 ? "·" : "?";
  }
  div.querySelector(".grid").setAttribute("aria-label", "Contents of " + kind + ": " + txt.replace(/·+$/, "") || "empty");
  div.querySelector(".textview").textContent = "As text: " + (txt.replace(/·+$/, "") || "(empty)");
}

function highlight(side, ev, now) {
  if (!ev.region) return;
  const div = document.querySelector("#" + side.el + "-regions .region[data-stag='" + ev.region + "']");
  if (!div) return;
  const cells = div.querySelector(".grid").children;
  for (let i = ev.offset; i < ev.offset + ev.len && i < cells.length; i++) {
    cells[i].classList.add("hit", "placed");
    S.hits.set(cells[i], now + HIT_MS);
  }
  const where = ev.tagged ? "STag " + hex(ev.stag) + " TO " + hex(ev.to, 4) : "MSN " + ev.msn + " MO " + ev.mo;
  div.querySelector(".meta").dataset.last = "last placed: " + ev.len + " octets at offset " + ev.offset + " (" + where + ", segment #" + ev.seq + ")";
  div.setAttribute("data-last", div.querySelector(".meta").dataset.last);
}

function addCQ(side, ev) {
  const ol = $(side.el + "-cq");
  const li = document.createElement("li");
  const ok = ev.status === "SUCCESS" || ev.status === "success";
  li.className = ok ? "ok" : "bad";
  li.textContent = (ok ? "✔ " : "✘ ") + ev.op + " · WR " + ev.wrid + " · " + ev.status + " · " + ev.len + " octets";
  ol.prepend(li);
  while (ol.children.length > CQ_MAX) ol.lastChild.remove();
}

function ladderRow(side, ev) {
  const li = document.createElement("li");
  const b = document.createElement("button");
  b.type = "button";
  const out = side === S.local;
  li.className = (out ? "out" : "in") + (ev.kind === "terminate" ? " term" : "") + (ev.tagged ? " tagged" : " untagged");
  let text;
  if (ev.kind === "terminate") {
    text = (out ? "→ " : "← ") + "TERMINATE " + (ev.typeName || "") + " / " + (ev.codeName || "");
  } else {
    const fields = ev.tagged ? "STag " + hex(ev.stag) + " TO " + hex(ev.to, 4)
      : "QN " + ev.qn + " MSN " + ev.msn + " MO " + ev.mo;
    text = (out ? "→ " : "← ") + "#" + ev.seq + " " + ev.op + " · " + (ev.tagged ? "tagged" : "untagged") + " · " + fields + " · " + ev.len + " B" + (ev.last ? " · L" : "");
  }
  b.textContent = text;
  b.setAttribute("aria-label", (out ? "sent by this tab: " : "sent by the remote peer: ") + text.slice(2));
  const entry = { side: out ? "this tab" : "remote peer", ev };
  b.addEventListener("click", () => select(entry, b));
  li.append(b);
  return li;
}

function select(entry, btn) {
  document.querySelectorAll("#ladder button[aria-pressed='true']").forEach((x) => x.setAttribute("aria-pressed", "false"));
  btn.setAttribute("aria-pressed", "true");
  const e = entry.ev;
  const rows = [["Sent by", entry.side], ["Kind", e.kind], ["RDMAP opcode", e.op || "–"],
    ["DDP-SSN (seq)", e.seq], ["Tagged (T)", e.tagged ? "1 (tagged buffer model)" : "0 (untagged buffer model)"], ["Last (L)", e.last ? "1" : "0"]];
  if (e.tagged) rows.push(["STag", hex(e.stag)], ["Tagged Offset (TO)", hex(e.to, 4)]);
  else rows.push(["Queue Number (QN)", e.qn + (e.qn === 0 ? " (Send)" : e.qn === 1 ? " (Read Request)" : " (Terminate)")], ["MSN", e.msn], ["Message Offset (MO)", e.mo]);
  rows.push(["Payload length", e.len + " octets"]);
  if (e.kind === "terminate") rows.push(["Layer", e.layerName], ["Error type", e.typeName], ["Error code", e.codeName]);
  const dl = document.createElement("dl");
  for (const [k, v] of rows) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = String(v);
    dl.append(dt, dd);
  }
  const box = $("detail");
  box.textContent = "";
  const h = document.createElement("h3");
  h.textContent = "Selected segment";
  box.append(h, dl);
}

function showTerminate(side, ev) {
  if (S.terminated) {
    // The end that found the error knows the detail; the other got only
    // the triple.
    const dd = $("term-detail");
    if (dd && ev.detail && !dd.dataset.set) { dd.textContent = ev.detail; dd.dataset.set = "1"; }
    return;
  }
  S.terminated = true;
  const who = side === S.local ? "This tab" : "The remote peer";
  const dir = ev.remote ? "received a Terminate from its peer" : "detected the error and sent a Terminate";
  const box = $("terminate");
  box.hidden = false;
  box.innerHTML = "";
  const h = document.createElement("h2");
  h.textContent = "Stream terminated";
  const p = document.createElement("p");
  p.textContent = who + " " + dir + ".";
  const dl = document.createElement("dl");
  for (const [k, v] of [["Layer", ev.layerName + " (" + (ev.layer || 0) + ")"],
    ["Error type", ev.typeName + " (0x" + (ev.etype || 0).toString(16) + ")"],
    ["Error code", ev.codeName + " (0x" + (ev.code || 0).toString(16).padStart(2, "0") + ")"],
    ["What was wrong", ev.detail || "(the peer did not say)"]]) {
    const dt = document.createElement("dt"); dt.textContent = k;
    const dd = document.createElement("dd"); dd.textContent = v;
    if (k === "What was wrong") { dd.id = "term-detail"; if (ev.detail) dd.dataset.set = "1"; }
    dl.append(dt, dd);
  }
  const q = document.createElement("p");
  q.textContent = "Placement has stopped and outstanding work completes with a flush error. Connect again to start a new stream.";
  box.append(h, p, dl, q);
  setStatus("err", "Terminated: " + ev.typeName + " / " + ev.codeName);
  log("Terminate: " + ev.error, "err");
}

function applyEvents(side, events, now, frag) {
  for (const ev of events) {
    switch (ev.kind) {
      case "segment-sent":
        frag.push([side, ev]);
        break;
      case "segment-placed":
        highlight(side, ev, now);
        S.placedAt[side.el].push(now);
        S.placedTotal[side.el]++;
        break;
      case "completion":
        side.cqNew.push(ev);
        if (side === S.local && ev.op === "RECV" && ev.status === "SUCCESS") noteAdvert();
        break;
      case "terminate":
        frag.push([side, ev]);
        showTerminate(side, ev);
        break;
    }
  }
}

// noteAdvert reads an STag advertisement that arrived in a receive buffer.
function noteAdvert() {
  for (const r of S.local.regions) {
    if (!r.recv) continue;
    const t = new TextDecoder().decode(b64bytes(r.data)).replace(/\0+$/, "");
    const m = /^STag 0x([0-9a-f]+) TO 0x([0-9a-f]+) len (\d+)/.exec(t);
    if (m && !r.noted) { r.noted = true; log("The peer advertised " + m[0]); }
  }
}

function frame(now) {
  requestAnimationFrame(frame);
  const rows = [];
  if (S.wasmReady && S.mode !== "observe") {
    const d = JSON.parse(iwarpPeer.drain());
    if (S.observers) {
      S.report.local.events.push(...(d.events || []).filter((e) => reportKinds.has(e.kind)));
      if (d.regions) S.report.local.regions = d.regions;
    }
    if (d.regions) { S.local.regions = d.regions; drawRegions(S.local); fillStagSelects(); }
    applyEvents(S.local, d.events || [], now, rows);
    if (d.dropped) log(d.dropped + " events were not drawn (too many at once)");
    if (S.mode === "tab" && S.connected) {
      const keep = d.events.filter((e) => e.kind !== "message-delivered" && e.kind !== "state");
      S.relayQueue.push(...keep);
      if (d.regions) S.relayRegions = d.regions;
      if ((S.relayQueue.length || S.relayRegions) && now - S.lastRelay > 50) {
        signal({ type: "relay", to: S.remoteId, body: { events: S.relayQueue, regions: S.relayRegions } });
        S.relayQueue = []; S.relayRegions = null; S.lastRelay = now;
      }
    }
  }
  const q = S.remoteQueue;
  S.remoteQueue = [];
  if (S.observers) {
    for (const b of q) {
      S.report.remote.events.push(...(b.events || []).filter((e) => reportKinds.has(e.kind)));
      if (b.regions) S.report.remote.regions = b.regions;
    }
    sendReport(now);
  }
  for (const b of S.observeQueue.splice(0)) {
    if (b.local.regions) { S.local.regions = b.local.regions; drawRegions(S.local); }
    if (b.remote.regions) { S.remote.regions = b.remote.regions; drawRegions(S.remote); }
    applyEvents(S.local, b.local.events, now, rows);
    applyEvents(S.remote, b.remote.events, now, rows);
    if (b.status) $("status").textContent = "Observing tab " + S.observing + ": " + b.status;
  }
  for (const b of q) {
    if (b.regions) { S.remote.regions = b.regions; drawRegions(S.remote); fillStagSelects(); }
    applyEvents(S.remote, b.events || [], now, rows);
  }
  for (const side of [S.local, S.remote]) {
    // Only the newest entries are drawn: older ones would be trimmed at once.
    for (const ev of side.cqNew.slice(-CQ_MAX)) addCQ(side, ev);
    side.cqNew = [];
  }
  if (rows.length) {
    const ol = $("ladder");
    const frag = document.createDocumentFragment();
    for (const [side, ev] of rows.slice(-LADDER_MAX)) frag.append(ladderRow(side, ev));
    ol.append(frag);
    while (ol.children.length > LADDER_MAX) ol.firstChild.remove();
    ol.scrollTop = ol.scrollHeight;
  }
  postBurst(now);
  if (now - S.lastRate > 250) {
    S.lastRate = now;
    for (const k of ["local", "remote"]) {
      const a = S.placedAt[k];
      let i = 0;
      while (i < a.length && a[i] < now - 1000) i++;
      a.splice(0, i);
    }
    const el = $("rate");
    el.textContent = "Placements drawn in the last second: this tab " + S.placedAt.local.length +
      ", remote peer " + S.placedAt.remote.length + " (total " + S.placedTotal.local + " and " + S.placedTotal.remote + ").";
    el.dataset.remoteTotal = S.placedTotal.remote;
  }
  for (const [cell, t] of S.hits) {
    if (t <= now) { cell.classList.remove("hit"); S.hits.delete(cell); }
  }
}

// sendReport passes this tab's state to the tabs observing it, at most
// every 50 ms; in full (all regions) after the observers changed.
function sendReport(now) {
  const r = S.report;
  const any = r.local.events.length || r.remote.events.length || r.local.regions || r.remote.regions;
  if (!(any || S.reportFull) || now - S.lastReport < 50) return;
  if (S.reportFull) {
    r.local.regions = r.local.regions || S.local.regions;
    r.remote.regions = r.remote.regions || S.remote.regions;
    S.reportFull = false;
  }
  r.status = $("status").textContent;
  signal({ type: "report", body: r });
  S.report = emptyReport();
  S.lastReport = now;
}

function fillStagSelects() {
  const fill = (sel, regions, withNone) => {
    const v = sel.value;
    sel.textContent = "";
    if (withNone) sel.append(new Option("(none)", ""));
    for (const r of regions) {
      sel.append(new Option(hex(r.stag) + " " + (r.recv ? "recv MSN " + r.msn : r.name) + (r.valid ? "" : " (invalid)"), String(r.stag)));
    }
    if ([...sel.options].some((o) => o.value === v)) sel.value = v;
  };
  const remoteMem = S.remote.regions.filter((r) => !r.recv);
  for (const id of ["w-stag", "r-stag", "go-stag"]) fill($(id), remoteMem, false);
  fill($("s-inv"), remoteMem, true);
  const sinks = S.local.regions.filter((r) => !r.recv && r.access.includes("local write"));
  sinks.sort((a, b) => (b.name === "Read sink") - (a.name === "Read sink"));
  fill($("r-sink"), sinks, false);
  fill($("m-stag"), S.local.regions.filter((r) => !r.recv), false);
  $("f-go").disabled = S.mode !== "go";
}

// ---------- actions ----------

function parseData(s, mode) {
  if (mode === "hex") {
    const parts = s.replace(/0x/gi, "").split(/[^0-9a-f]+/i).filter(Boolean);
    const out = [];
    for (const p of parts) for (let i = 0; i < p.length; i += 2) out.push(parseInt(p.slice(i, i + 2), 16));
    return new Uint8Array(out);
  }
  return new TextEncoder().encode(s);
}

function remoteRegion(stag) {
  return S.remote.regions.find((r) => r.stag === Number(stag));
}

function needConn() {
  if (!S.connected) { log("Connect first.", "err"); return false; }
  return true;
}

function doWrite(data, stag, to) {
  if (!needConn()) return;
  const r = check(iwarpPeer.write(data, stag, to), "RDMA Write");
  if (r) log("RDMA Write WR " + r.wrid + ": " + data.length + " octets to STag " + hex(stag) + " TO " + hex(to, 4));
}

function actWrite() {
  const reg = remoteRegion($("w-stag").value);
  if (!reg) return log("No remote region to write to.", "err");
  doWrite(parseData($("w-data").value, $("w-mode").value), reg.stag, reg.base + Number($("w-off").value));
}

// postBurst posts the next Writes of a burst: as many as the send queue
// takes, at most 500 a frame, so that the page stays responsive.
function postBurst(now) {
  const b = S.burst;
  if (!b || !S.connected) { S.burst = null; return; }
  for (let i = 0; i < 500 && b.left > 0; i++) {
    const off = (b.done * 4) % Math.max(4, b.reg.len - 4);
    const v = b.done & 0xffff;
    const data = new TextEncoder().encode(String.fromCharCode(65 + (v % 26)) + (v % 1000).toString().padStart(3, "0"));
    const r = iwarpPeer.write(data, b.reg.stag, b.reg.base + off);
    if (r.error) {
      if (!/queue/i.test(r.error)) { log("Burst: " + r.error, "err"); S.burst = null; }
      break; // the send queue is full: go on next frame
    }
    b.left--; b.done++;
  }
  if (b.left === 0) {
    S.burst = null;
    log("Burst: " + b.done + " RDMA Writes posted in " + Math.round(now - b.start) + " ms");
  }
}

function actBurst() {
  if (!needConn()) return;
  const reg = remoteRegion($("w-stag").value);
  if (!reg) return log("No remote region to write to.", "err");
  const n = Number($("b-count").value);
  S.burst = { reg, left: n, done: 0, start: performance.now() };
  log("Burst: " + n + " RDMA Writes of 4 octets to STag " + hex(reg.stag));
}

function actRead() {
  if (!needConn()) return;
  const reg = remoteRegion($("r-stag").value);
  const sink = Number($("r-sink").value);
  if (!reg || !sink) return log("Choose a remote region and a local sink.", "err");
  const n = Number($("r-len").value);
  const r = check(iwarpPeer.read(n, reg.stag, reg.base + Number($("r-off").value), sink, 0), "RDMA Read");
  if (r) log("RDMA Read WR " + r.wrid + ": " + n + " octets from STag " + hex(reg.stag));
}

function doSend(data, solicited, inv) {
  if (!needConn()) return;
  const r = check(iwarpPeer.send(data, solicited, inv), "Send");
  if (r) log("Send WR " + r.wrid + ": " + data.length + " octets" + (solicited ? ", solicited" : "") + (inv ? ", invalidating " + hex(inv) : ""));
}

function actSend() {
  const v = $("s-variant").value;
  const inv = v.includes("inv") ? Number($("s-inv").value || 0) : 0;
  if (v.includes("inv") && !inv) return log("Choose the remote STag to invalidate.", "err");
  doSend(new TextEncoder().encode($("s-data").value), v.startsWith("se"), inv);
}

function actRegister() {
  if (!needConn()) return;
  const access = ($("m-rr").checked ? "r" : "") + ($("m-rw").checked ? "w" : "") + ($("m-lw").checked ? "l" : "");
  const r = check(iwarpPeer.register("Tab region", Number($("m-len").value), Number($("m-base").value), access), "register");
  if (r) log("Registered STag " + hex(r.stag));
}

function localStag() {
  const v = Number($("m-stag").value);
  if (!v) log("Choose one of this tab's regions.", "err");
  return v;
}

function actAdvertise() {
  const stag = localStag();
  const reg = S.local.regions.find((r) => r.stag === stag);
  if (!reg) return;
  doSend(new TextEncoder().encode("STag " + hex(reg.stag) + " TO " + hex(reg.base, 4) + " len " + reg.len), false, 0);
}

function goCmd(op, extra) {
  if (S.mode !== "go" || !S.connected) return log("Connect to the Go peer first.", "err");
  signal(Object.assign({ type: "go", op }, extra || {}));
}

function firstRemote() {
  const r = S.remote.regions.find((x) => !x.recv && x.valid);
  if (!r) log("The remote peer has no valid region.", "err");
  return r;
}

const faults = {
  "fault-stag": () => {
    let stag = 0x00dead01;
    while (S.remote.regions.some((r) => r.stag === stag)) stag += 0x100;
    log("Fault: RDMA Write to STag " + hex(stag) + ", which the peer never registered");
    doWrite(new TextEncoder().encode("bad STag"), stag, 0);
  },
  "fault-bounds": () => {
    const r = firstRemote(); if (!r) return;
    log("Fault: 16 octets at TO " + hex(r.base + r.len - 4, 4) + ", past the end of STag " + hex(r.stag));
    doWrite(new TextEncoder().encode("out of bounds!!!"), r.stag, r.base + r.len - 4);
  },
  "fault-key": () => {
    const r = firstRemote(); if (!r) return;
    const stale = ((r.stag & ~0xff) | ((r.stag + 1) & 0xff)) >>> 0;
    log("Fault: RDMA Write with STag " + hex(stale) + ": the right index, a stale key");
    doWrite(new TextEncoder().encode("stale key"), stale, r.base);
  },
  "fault-recv": () => {
    const free = S.remote.regions.filter((r) => r.recv && !r.filled).length;
    log("Fault: " + (free + 1) + " Sends for " + free + " posted receive buffers");
    for (let i = 0; i <= free; i++) doSend(new TextEncoder().encode("send #" + (i + 1)), false, 0);
  },
};

// ---------- start ----------

function wire() {
  const on = (id, f) => $(id).addEventListener("click", () => {
    try { const p = f(); if (p && p.catch) p.catch((e) => fail(e.message)); } catch (e) { fail(e.message); }
  });
  on("connect-go", connectGo);
  on("connect-tab", connectTab);
  on("observe-tab", observeTab);
  on("disconnect", () => {
    hangup(true);
    if (S.observing) { setObserving(0); S.mode = null; }
    setStatus("idle", "Disconnected");
  });
  on("do-write", actWrite);
  on("do-read", actRead);
  on("do-burst", actBurst);
  on("do-send", actSend);
  on("do-register", actRegister);
  on("do-recv", () => { if (needConn()) check(iwarpPeer.postRecv(64), "post receive"); });
  on("do-advertise", actAdvertise);
  on("do-invalidate", () => { const s = localStag(); if (s) check(iwarpPeer.invalidate(s), "invalidate"); });
  on("do-deregister", () => { const s = localStag(); if (s) check(iwarpPeer.deregister(s), "deregister"); });
  on("go-register", () => goCmd("register", { len: 64, base: 0x4000, access: "rw" }));
  on("go-recv", () => goCmd("post-recv", { len: 64 }));
  on("go-invalidate", () => goCmd("invalidate", { stag: Number($("go-stag").value) }));
  on("go-deregister", () => goCmd("deregister", { stag: Number($("go-stag").value) }));
  for (const id of Object.keys(faults)) on(id, faults[id]);
  $("tabs").addEventListener("change", () => {
    $("connect-tab").disabled = !S.wasmReady || !$("tabs").value;
    $("observe-tab").disabled = !$("tabs").value;
  });
  const ex = $("explain");
  if (localStorage.getItem("iwarp-explained")) ex.open = false;
  ex.addEventListener("toggle", () => { if (!ex.open) localStorage.setItem("iwarp-explained", "1"); });
}

async function loadWasm() {
  const go = new Go();
  const ready = new Promise((resolve) => { window.iwarpReady = resolve; });
  const { instance } = await WebAssembly.instantiateStreaming(fetch("iwarp.wasm"), go.importObject);
  go.run(instance);
  await ready;
  S.wasmReady = true;
  setStatus("idle", "Not connected: press “Connect to the Go peer”");
  log("Browser peer loaded (Go compiled to WebAssembly)");
}

wire();
fillStagSelects();
setStatus("connecting", "Loading the browser peer…");
openSignaling();
loadWasm().catch((e) => fail("loading iwarp.wasm: " + e.message));
requestAnimationFrame(frame);
