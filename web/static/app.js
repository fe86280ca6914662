// The demo page: draws both peers' memory, completion queues and the
// segment ladder, and drives the browser peer (iwarp.wasm, globalThis
// iwarpPeer) to the Go peer, over an RTCDataChannel (DDP over SCTP) or,
// as a fallback, over a WebSocket carrying MPA; or to another tab that
// agreed to pair. Events from both peers are queued as they arrive and
// drawn once per animation frame, so thousands of placements a second
// cost one redraw per frame.
"use strict";

const $ = (id) => document.getElementById(id);
const hex = (n, w = 8) => "0x" + Number(n).toString(16).padStart(w, "0");
const LADDER_MAX = 300;
const CQ_MAX = 50;
const HIT_MS = 1500;
const FALLBACK_MS = 5000; // the data channel must be up by then (automatic transport)
const CHART_SPAN = 10000, CHART_BIN = 100;

const S = {
  ws: null, myId: 0, wasmReady: false,
  pc: null, session: false, mode: null, transport: null, remoteId: 0, connected: false, terminated: false,
  attempt: 0,            // each connect attempt's number: stale callbacks are ignored
  streams: 1, up: 0,     // DDP streams asked for, and up
  mulpdu: 0,
  pairedWith: 0, offerer: false,
  awaitAnswerFrom: null, // whom this tab made an offer to (0: the Go peer)
  awaitTicket: false,
  local: { regions: [], cqNew: [], el: "local" },
  remote: { regions: [], cqNew: [], el: "remote" },
  remoteQueue: [], relayQueue: [], relayRegions: null, lastRelay: 0,
  rows: new Map(),       // ladder rows by flow and sequence number
  flows: new Map(),      // per receiving side and queue pair: arrivals, placements, deliveries
  stats: { segs: 0, overtook: 0, delivered: 0 },
  hits: new Map(),
  lastPlaced: new Map(),
  burst: null,
  placedAt: { local: [], remote: [] },
  placedTotal: { local: 0, remote: 0 },
  lastRate: 0,
  observers: 0, observing: 0, observeQueue: [],
  report: null, reportFull: false, lastReport: 0,
  impair: null, net: null,
  st: { timer: 0, sent: [0, 0], delivered: [0, 0], bins: [[], []], last: [0, 0], heldUntil: 0 },
  tour: new Set(),
};

function emptyReport() {
  return { local: { events: [], regions: null }, remote: { events: [], regions: null } };
}
S.report = emptyReport();
const reportKinds = new Set(["segment-sent", "segment-placed", "message-delivered", "completion", "terminate", "fpdu", "mpa-frame", "atomic-executed", "local-atomic"]);

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
  $("join").disabled = busy || !S.wasmReady;
  $("disconnect").disabled = !S.session && !S.observing && !S.pc;
  el.dataset.transport = S.connected ? S.transport || "" : "";
}

function fail(why) {
  log("Error: " + why, "err");
  if (!S.terminated) setStatus("err", "Error: " + why);
}

// ---------- signaling ----------

function openSignaling() {
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/ws";
  const ws = new WebSocket(url);
  S.ws = ws;
  ws.onmessage = (e) => onSignal(JSON.parse(e.data));
  ws.onclose = () => {
    if (S.ws !== ws) return;
    log("Signaling connection closed; reconnecting in 2 s", "err");
    S.pairedWith = 0;
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
      document.body.dataset.tab = m.id;
      log("Signaling connected; this is tab " + m.id);
      if (m.impair) showImpair(m.impair, "");
      if (S.impairWanted) signal({ type: "impair", impair: S.impairWanted });
      break;
    case "code":
      if (m.purpose === "pair") {
        $("my-code").textContent = "Code for the other tab: " + m.code;
        $("my-code").dataset.code = m.code;
        log("Pairing code " + m.code + ": type it in the other tab and press “Pair with tab”");
      } else {
        $("share-code").textContent = "Observing code: " + m.code;
        $("share-code").dataset.code = m.code;
        log("Observing code " + m.code + ": a tab that types it sees this tab's stream");
      }
      break;
    case "paired":
      S.pairedWith = m.peer; S.offerer = !!m.offerer;
      $("my-code").textContent = ""; delete $("my-code").dataset.code;
      log("Paired with tab " + m.peer + (m.offerer ? ": connecting" : ": it connects"));
      if (m.offerer) connectTab().catch((e) => fail("pairing: " + e.message));
      else setStatus("connecting", "Paired with tab " + m.peer + ", waiting for its offer…");
      break;
    case "unpaired":
      log("The pairing ended" + (m.text ? ": " + m.text : ""));
      if (S.mode === "tab") { hangup(false); setStatus("idle", "Disconnected: " + (m.text || "the pairing ended")); }
      S.pairedWith = 0;
      break;
    case "answer":
      // Only from the peer this tab made its offer to, and only once.
      if (!S.pc || S.awaitAnswerFrom === null || (m.from || 0) !== S.awaitAnswerFrom || S.pc.signalingState !== "have-local-offer") {
        log("An answer from " + (m.from ? "tab " + m.from : "the server") + " that this tab did not ask for: ignored", "err");
        break;
      }
      S.awaitAnswerFrom = null;
      S.pc.setRemoteDescription({ type: "answer", sdp: m.sdp }).catch((e) => fail("the answer: " + e.message));
      break;
    case "offer": // the tab this one paired with connects: answer, as the passive side
      if (!m.from || m.from !== S.pairedWith || S.offerer) {
        log("An offer from tab " + m.from + ", which this tab did not pair with: ignored", "err");
        break;
      }
      acceptTab(m).catch((e) => fail("pairing: " + e.message));
      break;
    case "relay":
      if (S.mode === "tab" && m.from === S.pairedWith && m.body) queueRemote(m.body);
      break;
    case "go-state":
      S.goPeer = m.id; // a new Go peer: what a replaced one sent late is ignored
      // falls through
    case "go-events":
      if (S.mode === "go" && m.id === S.goPeer) queueRemote({ events: m.events || [], regions: m.regions });
      if (m.net) showNet(m.net);
      break;
    case "impair":
      showImpair(m.impair, m.transport || S.transport);
      break;
    case "mpa-ticket":
      if (S.awaitTicket) { S.awaitTicket = false; startMPA(m); }
      break;
    case "observing":
      startObserving(m.peer);
      break;
    case "observers":
      S.observers = m.len || 0;
      S.reportFull = true;
      if (S.observers) log(S.observers + " tab(s) observing this one");
      break;
    case "observe-ended":
      log("Observing ended: " + (m.text || ""));
      if (S.mode === "observe") { stopObserving(); setStatus("idle", "Not observing"); }
      break;
    case "report":
      if (S.mode === "observe" && m.from === S.observing && m.body) S.observeQueue.push(m.body);
      break;
    case "go-log":
      log(m.text);
      break;
    case "error":
      log((m.op ? m.op + ": " : "") + m.text, "err");
      if (m.purpose === "mpa" && S.transport === "mpa" && !S.connected) fail(m.text);
      if ((m.purpose === "join" || m.purpose === "observe") && !S.connected) setStatus("err", m.text);
      break;
  }
}

// queueRemote keeps the remote peer's batches for the next frame. A
// hidden tab draws no frames: past 600 batches the oldest events go (the
// regions, which carry the bytes, are kept).
function queueRemote(b) {
  const q = S.remoteQueue;
  q.push(b);
  if (q.length > 600) {
    const old = q.splice(0, 300);
    const regions = old.reduce((r, x) => x.regions || r, null);
    if (regions && !q[0].regions) q[0].regions = regions;
  }
}

// ---------- connecting ----------

function mulpdu() { return Number($("mulpdu").value); }

// newPeerConnection makes the RTCPeerConnection and the DDP data
// channels (negotiated: id 1, and id 3 for a second stream).
function newPeerConnection(passive, mp, streams) {
  hangup(false);
  stopObserving();
  S.terminated = false;
  $("terminate").hidden = true;
  const attempt = ++S.attempt;
  const pc = new RTCPeerConnection({ iceServers: [] });
  S.pc = pc; S.session = true; S.transport = "dc";
  S.streams = streams; S.up = 0; S.mulpdu = mp;
  const ordered = !$("unordered").checked;
  for (let q = 0; q < streams; q++) {
    const dc = pc.createDataChannel("iwarp-ddp", { negotiated: true, id: 1 + 2 * q, protocol: "iwarp-ddp", ordered });
    const r = iwarpPeer.connect(dc, { mulpdu: mp, passive, qp: q }, (err) => {
      if (attempt !== S.attempt) return;
      if (err) return fail("the DDP Stream Session on data channel " + (1 + 2 * q) + ": " + err);
      setupLocalMemory(q);
      if (++S.up < streams) return;
      S.connected = true;
      const who = S.mode === "go" ? "the Go peer" : "tab " + S.remoteId;
      setStatus("ok", "Connected to " + who + " over a WebRTC data channel: DDP over SCTP (RFC 5043), MULPDU " + mp +
        ", this tab sends " + (ordered ? "ordered" : "unordered") + (streams > 1 ? ", 2 DDP streams (data channels 1 and 3)" : ""));
      $("transport-now").textContent = "Transport: data channel · DTLS · SCTP · UDP";
      log("DDP Stream Session up with " + who);
      tourDone("connect");
      streamsPanel();
    });
    if (r.error) throw new Error(r.error);
  }
  pc.onconnectionstatechange = () => {
    if (pc !== S.pc) return;
    if (pc.connectionState === "failed" || pc.connectionState === "closed") fail("the WebRTC connection " + pc.connectionState);
  };
  return { pc, attempt };
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
  const t = $("transport").value;
  const noRTC = typeof RTCPeerConnection !== "function";
  if (t === "mpa") return connectMPA("");
  if (noRTC) {
    if (t === "dc") return fail("this browser has no WebRTC (RTCPeerConnection)");
    return connectMPA("this browser offers no WebRTC data channels");
  }
  resetViews("Go peer (pion/webrtc, native)");
  S.mode = "go"; S.remoteId = 0;
  const streams = $("two-streams").checked ? 2 : 1;
  setStatus("connecting", "Connecting to the Go peer over a WebRTC data channel…");
  const { pc, attempt } = newPeerConnection(false, mulpdu(), streams);
  if (t === "auto") {
    setTimeout(() => {
      if (attempt === S.attempt && !S.connected && S.transport === "dc") {
        connectMPA("the data channel was not up within " + FALLBACK_MS / 1000 + " s");
      }
    }, FALLBACK_MS);
  }
  await pc.setLocalDescription(await pc.createOffer());
  await iceGathered(pc);
  if (attempt !== S.attempt) return;
  S.awaitAnswerFrom = 0;
  signal({ type: "offer", sdp: pc.localDescription.sdp, mulpdu: mulpdu(), streams });
}

// connectMPA falls back to (or chooses) MPA over a WebSocket: the server
// gives a ticket for /mpa, and the browser peer runs the MPA Initiator
// over that WebSocket.
function connectMPA(why) {
  if (why) log("Falling back to MPA over a WebSocket: " + why);
  hangup(true);
  stopObserving();
  resetViews("Go peer (MPA over a WebSocket)");
  S.terminated = false;
  $("terminate").hidden = true;
  S.mode = "go"; S.remoteId = 0; S.transport = "mpa"; S.session = true; S.streams = 1; S.up = 0;
  S.attempt++;
  S.awaitTicket = true;
  setStatus("connecting", "Connecting to the Go peer over a WebSocket (MPA)…");
  signal({ type: "mpa", mulpdu: mulpdu(), markers: $("markers").checked });
}

function startMPA(m) {
  const attempt = S.attempt;
  const url = (location.protocol === "https:" ? "wss://" : "ws://") + location.host + "/mpa?ticket=" + encodeURIComponent(m.ticket);
  S.mulpdu = m.mulpdu;
  const r = iwarpPeer.connectMPA(url, { mulpdu: m.mulpdu, markers: !!m.markers }, (err) => {
    if (attempt !== S.attempt) return;
    if (err) return fail("MPA over the WebSocket: " + err);
    setupLocalMemory(0);
    S.up = 1; S.connected = true;
    setStatus("ok", "Connected to the Go peer over a WebSocket: MPA over TCP (RFC 5044), FPDUs with CRC" +
      (m.markers ? " and Markers" : "") + ", segments of at most " + m.mulpdu + " octets" +
      (S.mulpdu > mulpdu() ? " (MPA's floor is 128)" : S.mulpdu < mulpdu() ? " (MPA's largest is 64768)" : ""));
    $("transport-now").textContent = "Transport: WebSocket · MPA · TCP (byte stream: in order)";
    if (S.impair) showImpair(S.impair, "mpa");
    $("ladder-help").textContent = "Each row is one FPDU or startup frame as it crossed the WebSocket (→ from this tab, ← from the Go peer): " +
      "where it starts in the stream, its ULPDU_Length, PAD, CRC and Markers, and the DDP segment inside. A byte stream keeps the order: nothing overtakes.";
    log("MPA connection up with the Go peer");
    tourDone("connect");
    tourDone("mpa");
    streamsPanel();
  });
  if (r.error) fail(r.error);
}

async function connectTab() {
  const to = S.pairedWith;
  if (!to) return;
  resetViews("tab " + to + " (browser peer)");
  S.mode = "tab"; S.remoteId = to;
  setStatus("connecting", "Connecting to tab " + to + "…");
  const { pc, attempt } = newPeerConnection(false, mulpdu(), 1);
  await pc.setLocalDescription(await pc.createOffer());
  await iceGathered(pc);
  if (attempt !== S.attempt) return;
  S.awaitAnswerFrom = to;
  signal({ type: "offer", to, sdp: pc.localDescription.sdp, mulpdu: mulpdu() });
}

async function acceptTab(m) {
  if (!S.wasmReady) return;
  resetViews("tab " + m.from + " (browser peer)");
  S.mode = "tab"; S.remoteId = m.from;
  setStatus("connecting", "Tab " + m.from + " is connecting…");
  const { pc, attempt } = newPeerConnection(true, m.mulpdu || mulpdu(), 1);
  await pc.setRemoteDescription({ type: "offer", sdp: m.sdp });
  await pc.setLocalDescription(await pc.createAnswer());
  await iceGathered(pc);
  if (attempt !== S.attempt) return;
  signal({ type: "answer", to: m.from, sdp: pc.localDescription.sdp });
}

function startObserving(id) {
  hangup(true);
  resetViews("the peer of tab " + id);
  $("local-sub").textContent = "(tab " + id + ", observed)";
  S.mode = "observe"; S.observing = id; S.observeQueue = [];
  for (const f of document.querySelectorAll("#controls fieldset")) f.disabled = true;
  setStatus("ok", "Observing tab " + id + " (read-only)");
  log("Observing tab " + id + ": its memory is drawn on the left, its peer's on the right");
}

function stopObserving() {
  if (!S.observing) return;
  signal({ type: "observe", code: "" });
  S.observing = 0; S.observeQueue = [];
  if (S.mode === "observe") S.mode = null;
  for (const f of document.querySelectorAll("#controls fieldset")) f.disabled = false;
  fillStagSelects();
}

function hangup(tell) {
  S.attempt++;
  stopSteady();
  if (S.session) {
    if (tell && S.mode === "go") signal({ type: "hangup" });
    iwarpPeer.close();
  }
  if (S.pc) { S.pc.close(); S.pc = null; }
  S.session = false; S.connected = false; S.awaitAnswerFrom = null; S.awaitTicket = false; S.up = 0;
  $("transport-now").textContent = "";
  $("net-loss").disabled = $("net-dup").disabled = false;
}

const ladderHelp = document.getElementById("ladder-help").innerHTML;

function resetViews(remoteName) {
  $("ladder-help").innerHTML = ladderHelp;
  S.goPeer = -1;
  S.local.regions = []; S.remote.regions = [];
  S.local.cqNew = []; S.remote.cqNew = [];
  S.atomicOrig = undefined;
  S.remoteQueue = []; S.relayQueue = [];
  slow.queue = []; // a new stream: slow motion's queued events were the old one's
  S.rows = new Map(); S.flows = new Map(); S.stats = { segs: 0, overtook: 0, delivered: 0 };
  S.st = { timer: 0, sent: [0, 0], delivered: [0, 0], bins: [[], []], last: [0, 0], heldUntil: 0 };
  $("ladder").textContent = "";
  $("ladder-stats").textContent = "";
  $("local-cq").textContent = ""; $("remote-cq").textContent = "";
  $("detail").innerHTML = '<p class="hint">No segment selected.</p>';
  $("remote-sub").textContent = "(" + remoteName + ")";
  $("local-sub").textContent = "(browser peer, WebAssembly)";
  drawRegions(S.local); drawRegions(S.remote);
  fillStagSelects();
}

// The browser peer's memory for queue pair q: a region the peer may
// write and read, a sink for RDMA Reads, and two receive buffers.
function setupLocalMemory(q) {
  const sfx = q ? ", stream " + (1 + 2 * q) : "";
  check(iwarpPeer.register("Tab memory" + sfx, 256, 0x2000, "rwl", q), "register");
  if (!q) check(iwarpPeer.register("Read sink", 64, 0, "l", q), "register");
  check(iwarpPeer.postRecv(64, q), "post receive");
  check(iwarpPeer.postRecv(64, q), "post receive");
}

function check(r, what) {
  if (r && r.error) { log(what + ": " + r.error, "err"); return null; }
  return r;
}

// ---------- the network ----------

function impairFromSliders() {
  return { preset: "custom", loss: Number($("net-loss").value), delay: Number($("net-delay").value),
    jitter: Number($("net-jitter").value), dup: Number($("net-dup").value) };
}

function setImpair(im) {
  S.impairWanted = im;
  signal({ type: "impair", impair: im });
}

function showImpair(im, transport) {
  S.impair = im;
  const custom = !im.preset || im.preset === "custom";
  if (!S.netEditing) { // not while the user is dragging a slider
    $("net-preset").value = custom ? "custom" : im.preset;
    for (const [k, unit] of [["loss", " %"], ["delay", " ms"], ["jitter", " ms"], ["dup", " %"]]) {
      $("net-" + k).value = im[k] || 0;
      $("net-" + k + "-v").textContent = (im[k] || 0) + unit;
    }
  }
  // A byte stream cannot lose or duplicate what TCP carries.
  $("net-loss").disabled = $("net-dup").disabled = transport === "mpa";
  const clean = !im.loss && !im.delay && !im.jitter && !im.dup;
  let t = "Network now: " + (custom ? "custom" : im.preset) + " — " + (clean ? "no impairment" :
    "loss " + im.loss + " %, delay " + im.delay + " ms, jitter up to " + im.jitter + " ms, duplicates " + im.dup + " %");
  if (transport === "mpa") t += ". On this WebSocket (TCP) path only delay and jitter apply, in order: TCP hides loss as delay and never reorders.";
  else t += ", on each UDP packet both ways.";
  $("net-now").textContent = t;
  $("net-now").dataset.preset = custom ? "custom" : im.preset;
  if (im.jitter >= 20 || im.loss > 0) tourDone("reorder");
}

function showNet(n) {
  S.net = n;
  const d = (x, what) => what + ": " + x.packets + (S.transport === "mpa" ? " writes" : " packets") +
    (x.dropped ? ", " + x.dropped + " lost" : "") + (x.duplicated ? ", " + x.duplicated + " duplicated" : "") +
    (x.reordered ? ", " + x.reordered + " reordered" : "") + (x.delayed ? ", " + x.delayed + " delayed" : "");
  $("net-stats").textContent = d(n.in, "page → Go peer") + " · " + d(n.out, "Go peer → page");
}

// ---------- drawing the memory ----------

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

// drawRegions rebuilds a peer's region list when the set changed and
// otherwise updates the cells in place.
// Memory windows (r.window) are not drawn as regions of their own: each
// is listed under its region (r.parent) and outlined in its grid.
function drawRegions(side) {
  const box = $(side.el + "-regions");
  const shown = side.regions.filter((r) => !r.window);
  const key = shown.map((r) => r.stag + ":" + r.len).join(",");
  if (box.dataset.key !== key) {
    box.dataset.key = key;
    box.textContent = "";
    for (const k of [...regionCache.keys()]) if (k.startsWith(side.el + ":")) regionCache.delete(k);
    if (shown.length === 0) {
      const p = document.createElement("p");
      p.className = "empty";
      p.textContent = S.connected || side === S.remote ? "No regions." : "Connect to see this peer's memory.";
      box.append(p);
    }
    for (const r of shown) box.append(regionElement(r));
  }
  for (const r of shown) updateRegion(side, r);
}

function regionElement(r) {
  const div = document.createElement("div");
  div.className = "region";
  div.dataset.stag = r.stag;
  div.dataset.name = r.name;
  div.dataset.qp = r.qp || 0;
  const h = document.createElement("h4");
  const meta = document.createElement("p");
  meta.className = "meta";
  const grid = document.createElement("div");
  grid.className = "grid" + (r.len > 256 ? " wide" : "");
  grid.setAttribute("role", "img");
  for (let i = 0; i < r.len; i++) {
    const c = document.createElement("span");
    c.className = "cell";
    grid.append(c);
  }
  const text = document.createElement("p");
  text.className = "textview";
  const wins = document.createElement("ul");
  wins.className = "windows";
  wins.setAttribute("aria-label", "Memory windows over this region");
  div.append(h, meta, wins, grid, text);
  return div;
}

// regionDiv finds a region's element, from a cache that drawRegions
// empties whenever it rebuilds the list.
const regionCache = new Map();
function regionDiv(side, stag) {
  const k = side.el + ":" + stag;
  let e = regionCache.get(k);
  if (e === undefined || (e && !e.div.isConnected)) {
    const div = document.querySelector("#" + side.el + "-regions .region[data-stag='" + stag + "']");
    e = div ? { div, cells: div.querySelector(".grid").children } : null;
    regionCache.set(k, e);
  }
  return e && e.div;
}
function regionCells(side, stag) {
  regionDiv(side, stag);
  const e = regionCache.get(side.el + ":" + stag);
  return e ? e.cells : null;
}

function updateRegion(side, r) {
  const div = regionDiv(side, r.stag);
  if (!div) return;
  const kind = r.recv ? "Receive buffer for MSN " + r.msn + (r.qp ? ", stream " + (1 + 2 * r.qp) : "") : r.name;
  div.querySelector("h4").textContent = kind;
  div.classList.toggle("invalid", !r.valid);
  div.classList.toggle("recv", !!r.recv);
  div.classList.toggle("filled", !!r.filled);
  const state = !r.valid ? "INVALID (STag no longer usable)" : r.recv ? (r.filled ? "delivered: a Send completed into it" : "posted, waiting for a Send") : "valid";
  div.querySelector(".meta").textContent =
    "STag " + hex(r.stag) + " · base TO " + hex(r.base, 4) + " · " + r.len + " octets · rights: " + (r.access || "local read only") + " · " + state;
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
  const shown = txt.replace(/·+$/, "");
  div.querySelector(".grid").setAttribute("aria-label", "Contents of " + kind + ": " + (shown || "empty"));
  drawWindows(side, r, div, cells);
  const advert = r.recv ? advertOf(data) : null;
  div.querySelector(".textview").textContent = r.len === 8 ? "As a 64-bit number (little-endian, as FetchAdd adds): " + word64(r)
    : advert ? "As an advertisement (rdmap.RemoteBuffer, 16 octets): " + advert
    : "As text: " + (shown || "(empty)");
}

// drawWindows lists the memory windows over region r, each with its
// STag, TO, length and rights, and outlines their octets in its grid.
function drawWindows(side, r, div, cells) {
  const wins = side.regions.filter((w) => w.window && w.parent === r.stag);
  const ul = div.querySelector(".windows");
  ul.textContent = "";
  const mark = new Array(cells.length).fill("");
  for (const w of wins) {
    const li = document.createElement("li");
    li.className = "window" + (w.valid ? "" : " invalid");
    li.dataset.stag = w.stag;
    const off = w.base - r.base;
    li.textContent = "Window STag " + hex(w.stag) + " · TO " + hex(w.base, 4) + " · " + w.len + " octets (offset " + off + " of this region) · rights: " +
      (w.access || "none") + " · " + (w.valid ? "valid, on this stream alone" : "INVALID (STag no longer usable)");
    ul.append(li);
    for (let i = off; i < off + w.len && i < cells.length; i++) if (w.valid || !mark[i]) mark[i] = w.valid ? "win" : "win-gone";
  }
  for (let i = 0; i < cells.length; i++) {
    cells[i].classList.toggle("win", mark[i] === "win");
    cells[i].classList.toggle("win-gone", mark[i] === "win-gone");
  }
}

// markCells marks a placement's cells: placed (amber) until its message
// is delivered (green).
function markCells(side, p, cls, now) {
  if (!p.region) return;
  const cells = regionCells(side, p.region);
  if (!cells) return;
  for (let i = p.offset; i < p.offset + p.len && i < cells.length; i++) {
    const c = cells[i];
    if (cls === "pending") {
      c.classList.remove("delivered");
      c.classList.add("pending", "hit");
      S.hits.set(c, now + HIT_MS);
    } else {
      c.classList.remove("pending");
      c.classList.add("delivered");
    }
  }
}

function addCQ(side, ev) {
  const ol = $(side.el + "-cq");
  const li = document.createElement("li");
  const ok = ev.status === "SUCCESS" || ev.status === "success";
  li.className = ok ? "ok" : "bad";
  li.textContent = (ok ? "✔ " : "✘ ") + ev.op + " · WR " + ev.wrid + " · " + ev.status + " · " + ev.len + " octets" + (ev.qp ? " · stream " + (1 + 2 * ev.qp) : "");
  ol.prepend(li);
  while (ol.children.length > CQ_MAX) ol.lastChild.remove();
}

// ---------- the ladder: sending, arrival, placement, delivery ----------

function other(side) { return side === S.local ? S.remote : S.local; }

// flow returns what is known of the segments arriving at side on queue
// pair qp: the order they arrived in, the lowest sequence number not yet
// placed, and placements waiting for their message's delivery.
function flow(side, qp) {
  const k = side.el + ":" + (qp || 0);
  let f = S.flows.get(k);
  if (!f) {
    f = { key: k, arrivals: 0, floor: 0, placed: new Set(), max: -1, delivered: -1, pending: new Map() };
    S.flows.set(k, f);
  }
  return f;
}

function rowKey(f, seq) { return f.key + ":" + seq; }

// ladderRow returns the row of a segment, made when it is first heard
// of: sent by one side, or placed by the other (whichever is drawn first).
function ladderRow(f, ev, out, rows) {
  const k = rowKey(f, ev.seq);
  let row = S.rows.get(k);
  if (row) return row;
  const li = document.createElement("li");
  const b = document.createElement("button");
  b.type = "button";
  li.className = (out ? "out" : "in") + (ev.tagged ? " tagged" : " untagged");
  li.dataset.seq = ev.seq;
  li.dataset.op = ev.op || "";
  li.dataset.qp = ev.qp || 0;
  const fields = ev.tagged ? "TO " + hex(ev.to, 4) : "QN " + ev.qn + " MSN " + ev.msn + " MO " + ev.mo;
  const seq = S.transport === "mpa" ? "FPDU " + ev.seq : S.transport === "dc" ? "SSN " + ((ev.seq + 1) & 0xffff) : "seq " + ev.seq;
  const main = document.createElement("span");
  main.className = "seg";
  main.textContent = (out ? "→ " : "← ") + seq + (ev.qp ? " s" + (1 + 2 * ev.qp) : "") + " " + shortOp(ev.op) + " " + fields + " " + ev.len + "B" + (ev.last ? " L" : "");
  main.title = ev.op + (ev.tagged ? " to STag " + hex(ev.stag) : "");
  const arr = document.createElement("span");
  arr.className = "arr";
  arr.textContent = "in flight";
  b.append(main, arr);
  const entry = { side: out ? "this tab" : "remote peer", ev };
  b.addEventListener("click", () => select(entry, b));
  li.append(b);
  row = { li, arr, entry };
  S.rows.set(k, row);
  rows.push(li);
  return row;
}

// shortOp names an RDMAP opcode in a few letters, for the ladder.
function shortOp(op) {
  return ({ "RDMA Write": "Write", "RDMA Read Request": "ReadReq", "RDMA Read Response": "ReadResp", "Send": "Send",
    "Send with Solicited Event": "SendSE", "Send with Invalidate": "SendInv",
    "Send with Solicited Event and Invalidate": "SendSEInv", "Terminate": "Term",
    "Atomic Request": "AtomicReq", "Atomic Response": "AtomicResp" })[op] || op;
}

function segmentSent(side, ev, rows) {
  if (S.transport === "mpa" && S.mode === "go") return; // the FPDU rows show them
  const f = flow(other(side), ev.qp);
  if (f.placed.has(ev.seq) || ev.seq <= f.delivered) return; // drawn already
  ladderRow(f, ev, side === S.local, rows);
}

// segmentPlaced records a segment's arrival at side: its place in the
// arrival order, whether it overtook an earlier segment, and its cells.
function segmentPlaced(side, ev, now, rows) {
  const f = flow(side, ev.qp);
  // An observer may join a stream midway: it counts from what it sees first.
  if (f.arrivals === 0 && S.mode === "observe") { f.floor = ev.seq; f.delivered = ev.seq - 1; }
  const n = ++f.arrivals;
  const overtook = ev.seq > f.floor;  // some earlier segment is still missing
  const late = ev.seq < f.max;        // a later segment came first
  f.placed.add(ev.seq);
  f.max = Math.max(f.max, ev.seq);
  while (f.placed.has(f.floor)) { f.placed.delete(f.floor); f.floor++; }
  const p = { region: ev.region, offset: ev.offset, len: ev.len };
  f.pending.set(ev.seq, p);
  markCells(side, p, "pending", now);
  S.stats.segs++;
  if (overtook) S.stats.overtook++;
  const row = S.transport === "mpa" && S.mode === "go" ? null : ladderRow(f, ev, side !== S.local, rows);
  if (row) {
    row.arr.textContent = "arr " + n + (overtook ? " ⤴" : late ? " late" : "") + " · placed";
    row.arr.title = overtook ? "arrived while segment #" + f.floor + ", sent earlier, was still missing" : late ? "a segment sent later arrived first" : "";
    row.li.classList.add("placed");
    row.li.dataset.placedOp = ev.op || ""; // the opcode as the receiver decoded it
    row.li.classList.toggle("overtook", overtook);
    row.li.classList.toggle("late", late);
    row.entry.arrival = n; row.entry.overtook = overtook;
  }
  if (ev.region) S.lastPlaced.set(side.el + ":" + ev.region, [side, ev, n]);
}

// showLastPlaced says, once a frame, where each region's latest
// placement landed.
function showLastPlaced() {
  for (const [side, ev, n] of S.lastPlaced.values()) {
    const div = regionDiv(side, ev.region);
    if (!div) continue;
    const where = ev.tagged ? "STag " + hex(ev.stag) + " TO " + hex(ev.to, 4) : "MSN " + ev.msn + " MO " + ev.mo;
    const t = "last placed: " + ev.len + " octets at offset " + ev.offset + " (" + where + ", segment #" + ev.seq + ", arrival " + n + ")";
    div.dataset.last = t;
    div.querySelector(".meta").dataset.last = t;
  }
  S.lastPlaced.clear();
}

// messageDelivered marks every segment of the message (those after the
// previous delivery, up to this one's last) delivered.
function messageDelivered(side, ev, now) {
  const f = flow(side, ev.qp);
  for (let s = f.delivered + 1; s <= ev.seq; s++) {
    const p = f.pending.get(s);
    if (p) { markCells(side, p, "delivered", now); f.pending.delete(s); }
    const row = S.rows.get(rowKey(f, s));
    if (row) {
      row.li.classList.add("delivered");
      row.arr.textContent = row.arr.textContent.replace(/ · placed$/, "") + " · dlvd";
    }
  }
  f.delivered = Math.max(f.delivered, ev.seq);
  S.stats.delivered++;
  if (side === S.remote && S.mode === "go") streamDelivered(ev.qp || 0, now);
  if (S.tourWrite && side === S.remote && ev.tagged && ev.len >= 1000) tourDone("write");
}

// fpduRow draws an FPDU (or a startup frame) of the MPA path as the
// browser's Tap read it off the WebSocket.
function fpduRow(ev, rows) {
  const li = document.createElement("li");
  const b = document.createElement("button");
  b.type = "button";
  const out = ev.out;
  li.className = (out ? "out" : "in") + " fpdu" + (ev.tagged ? " tagged" : " untagged") + (ev.error ? " term" : "");
  li.dataset.op = ev.op || "";
  let text;
  if (ev.kind === "mpa-frame") {
    li.className = (out ? "out" : "in") + " fpdu frame";
    text = (out ? "→ " : "← ") + (ev.error ? "bad startup frame: " + ev.error : ev.text + " · " + ev.len + " octets");
  } else if (ev.error) {
    text = (out ? "→ " : "← ") + "FPDU #" + (ev.seq || 0) + " @" + (ev.pos || 0) + ": " + ev.error;
  } else {
    const fields = ev.tagged ? "TO " + hex(ev.to, 4) : "QN " + ev.qn + " MSN " + ev.msn + " MO " + ev.mo;
    const nm = ev.markers ? ev.markers.length : 0;
    text = (out ? "→ " : "← ") + "FPDU #" + (ev.seq || 0) + " @" + (ev.pos || 0) + " " + ev.wire + "B = 2+" + (ev.ulpdu || 0) +
      (ev.pad ? "+pad " + ev.pad : "") + "+CRC 4" + (nm ? "+" + nm + " Marker" + (nm > 1 ? "s" : "") + " (at +" + ev.markers.join(", +") + ")" : "") +
      " · " + shortOp(ev.op) + " " + fields + " " + (ev.len || 0) + "B" + (ev.last ? " L" : "") + " · CRC " + hex(ev.crc || 0);
    if (ev.markers && ev.markers.length) li.classList.add("marked");
  }
  b.textContent = text;
  b.addEventListener("click", () => select({ side: out ? "this tab" : "remote peer", ev }, b));
  li.append(b);
  rows.push(li);
}

function select(entry, btn) {
  document.querySelectorAll("#ladder button[aria-pressed='true']").forEach((x) => x.setAttribute("aria-pressed", "false"));
  btn.setAttribute("aria-pressed", "true");
  const e = entry.ev;
  const rows = [["Sent by", entry.side], ["Kind", e.kind], ["RDMAP opcode", e.op || "–"]];
  if (e.kind === "fpdu") {
    rows.push(["Stream position", e.pos || 0], ["Octets on the wire", e.wire], ["ULPDU_Length", e.ulpdu || 0], ["PAD", e.pad || 0],
      ["Markers (offsets in the FPDU)", e.markers && e.markers.length ? e.markers.join(", ") : "none"], ["CRC field", hex(e.crc || 0)]);
  } else if (e.kind !== "mpa-frame") {
    rows.push(["Sequence number", e.seq]);
    if (S.transport === "dc") rows.push(["DDP-SSN", (e.seq + 1) & 0xffff]);
    if (entry.arrival) rows.push(["Arrival order", entry.arrival + (entry.overtook ? " (overtook an earlier segment)" : "")]);
  }
  rows.push(["Tagged (T)", e.tagged ? "1 (tagged buffer model)" : "0 (untagged buffer model)"], ["Last (L)", e.last ? "1" : "0"]);
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
  h.textContent = e.kind === "fpdu" ? "Selected FPDU" : "Selected segment";
  box.append(h, dl);
}

function terminateRow(side, ev, rows) {
  const li = document.createElement("li");
  li.className = (side === S.local ? "out" : "in") + " term";
  const b = document.createElement("button");
  b.type = "button";
  b.textContent = (side === S.local ? "→ " : "← ") + "TERMINATE " + (ev.typeName || "") + " / " + (ev.codeName || "");
  b.addEventListener("click", () => select({ side: side === S.local ? "this tab" : "remote peer", ev }, b));
  li.append(b);
  rows.push(li);
}

function showTerminate(side, ev) {
  if (S.terminated) {
    // The end that found the error knows the detail; the other got only the triple.
    const dd = $("term-detail");
    if (dd && ev.detail && !dd.dataset.set) { dd.textContent = ev.detail; dd.dataset.set = "1"; }
    return;
  }
  S.terminated = true;
  stopSteady();
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

function applyEvents(side, events, now, rows) {
  if (slowTake(side, events)) return; // slow motion draws them later (slowmo.js)
  for (const ev of events) {
    switch (ev.kind) {
      case "segment-sent":
        segmentSent(side, ev, rows);
        if (side === S.local && S.mode === "go") S.st.sent[ev.qp || 0] += ev.last && ev.op === "RDMA Write" ? 1 : 0;
        break;
      case "segment-placed":
        segmentPlaced(side, ev, now, rows);
        S.placedAt[side.el].push(now);
        S.placedTotal[side.el]++;
        break;
      case "message-delivered":
        messageDelivered(side, ev, now);
        break;
      case "atomic-executed":
      case "local-atomic":
        atomicChanged(side, ev, now);
        break;
      case "completion":
        side.cqNew.push(ev);
        if (side === S.local && ev.orig !== undefined) atomicCompleted(ev);
        if (side === S.local && ev.op === "RECV" && ev.status === "SUCCESS") noteAdvert();
        if (side === S.remote && ev.op === "RECV" && ev.status === "SUCCESS" && S.tourSend) tourDone("send");
        break;
      case "fpdu":
      case "mpa-frame":
        fpduRow(ev, rows);
        break;
      case "terminate":
        terminateRow(side, ev, rows);
        showTerminate(side, ev);
        break;
    }
  }
}

// noteAdvert reads an advertisement (rdmap.RemoteBuffer's 16 octets) that
// arrived in a receive buffer.
function noteAdvert() {
  for (const r of S.local.regions) {
    if (!r.recv || r.noted) continue;
    const a = advertOf(b64bytes(r.data));
    if (a) { r.noted = true; log("The peer advertised " + a); }
  }
}

function frame(now) {
  requestAnimationFrame(frame);
  tick(now);
}

// A hidden tab gets no animation frames, but a paired or observed tab
// must still drain its peer's events, relay them to the other tab and
// report to its observers: while hidden, a timer ticks (as often as the
// browser lets a background tab's timers run).
setInterval(() => { if (document.hidden) tick(performance.now()); }, 100);

// tick drains the peers' events and draws them, relays them to a paired
// tab and reports them to observers.
function tick(now) {
  const rows = [];
  if (S.wasmReady && S.mode !== "observe") {
    const d = JSON.parse(iwarpPeer.drain());
    if (S.observers) {
      S.report.local.events.push(...d.events.filter((e) => reportKinds.has(e.kind)));
      if (d.regions) S.report.local.regions = d.regions;
    }
    if (d.regions) { S.local.regions = d.regions; drawRegions(S.local); fillStagSelects(); }
    applyEvents(S.local, d.events, now, rows);
    if (d.dropped) log(d.dropped + " events were not drawn (too many at once)");
    if (S.mode === "tab" && S.connected) {
      const keep = d.events.filter((e) => e.kind !== "state");
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
    if (b.transport) S.transport = b.transport;
    applyEvents(S.local, b.local.events, now, rows);
    applyEvents(S.remote, b.remote.events, now, rows);
    if (b.status) $("status").textContent = "Observing tab " + S.observing + ": " + b.status;
  }
  for (const b of q) {
    if (b.regions) { S.remote.regions = b.regions; drawRegions(S.remote); fillStagSelects(); }
    applyEvents(S.remote, b.events || [], now, rows);
  }
  slowDrain(now, rows);
  showLastPlaced();
  for (const side of [S.local, S.remote]) {
    // Only the newest entries are drawn: older ones would be trimmed at once.
    for (const ev of side.cqNew.slice(-CQ_MAX)) addCQ(side, ev);
    side.cqNew = [];
  }
  if (rows.length) {
    const ol = $("ladder");
    const frag = document.createDocumentFragment();
    for (const li of rows.slice(-LADDER_MAX)) frag.append(li);
    ol.append(frag);
    while (ol.children.length > LADDER_MAX) {
      const li = ol.firstChild;
      li.remove();
    }
    if (S.rows.size > 4 * LADDER_MAX) {
      for (const [k, r] of S.rows) { if (!r.li.isConnected) S.rows.delete(k); }
    }
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
    const ls = $("ladder-stats");
    ls.textContent = S.stats.segs ? S.stats.segs + " segments placed, " + S.stats.overtook + " of them before an earlier one (⤴); " +
      S.stats.delivered + " messages delivered." : "";
    ls.dataset.overtook = S.stats.overtook;
    drawStreams(now);
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
  r.transport = S.transport;
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
  const remoteMem = S.remote.regions.filter((r) => !r.recv && !r.qp);
  for (const id of ["w-stag", "r-stag", "go-stag"]) fill($(id), remoteMem, false);
  const atomicMem = remoteMem.filter((r) => (r.access || "").includes("remote atomic"));
  fill($("a-stag"), atomicMem.length ? atomicMem : remoteMem, false);
  showCounter();
  fill($("s-inv"), remoteMem, true);
  const sinks = S.local.regions.filter((r) => !r.recv && !r.qp && r.access.includes("local write"));
  sinks.sort((a, b) => (b.name === "Read sink") - (a.name === "Read sink"));
  fill($("r-sink"), sinks, false);
  fill($("m-stag"), S.local.regions.filter((r) => !r.recv && !r.qp), false);
  $("f-go").disabled = S.mode !== "go" || !!S.observing;
}

// ---------- two streams ----------

function streamsPanel() {
  const on = S.mode === "go" && S.transport === "dc" && S.streams > 1;
  $("f-streams").disabled = !on || !!S.observing;
  if (!on) {
    $("st-1").textContent = S.transport === "mpa" ? "Stream 1: a WebSocket carries one byte stream; two DDP streams need the data channel."
      : "Stream 1 (data channel 1): connect with “Second DDP stream” checked.";
    $("st-3").textContent = "";
  }
}

function streamDelivered(q, now) {
  S.st.delivered[q]++;
  S.st.last[q] = now;
  const bins = S.st.bins[q];
  const b = Math.floor(now / CHART_BIN);
  if (bins.length && bins[bins.length - 1][0] === b) bins[bins.length - 1][1]++;
  else bins.push([b, 1]);
  while (bins.length && bins[0][0] < b - CHART_SPAN / CHART_BIN) bins.shift();
}

function steadyTick() {
  if (!S.connected || S.terminated) return stopSteady();
  for (let q = 0; q < 2; q++) {
    const r = S.remote.regions.find((x) => (x.qp || 0) === q && !x.recv && x.valid);
    if (!r) continue;
    const n = S.st.sent[q];
    const off = (n * 8) % (r.len - 8);
    const data = new TextEncoder().encode("s" + (1 + 2 * q) + "#" + String(n % 10000).padStart(4, "0") + " ");
    const w = iwarpPeer.write(data, r.stag, r.base + off, q);
    if (w.error) { log("stream " + (1 + 2 * q) + ": " + w.error, "err"); continue; }
  }
}

function startSteady() {
  if (S.st.timer) return;
  S.st.timer = setInterval(steadyTick, 40);
  $("st-run").textContent = "Stop the steady Writes";
  log("Steady Writes: one every 40 ms on each stream");
}

function stopSteady() {
  if (!S.st.timer) return;
  clearInterval(S.st.timer);
  S.st.timer = 0;
  $("st-run").textContent = "Start steady Writes on both streams";
}

function holdStream() {
  signal({ type: "go", op: "hold", qp: 0, ms: 3000 });
  S.st.heldUntil = performance.now() + 3000;
  S.st.heldAt = [S.st.delivered[0], S.st.delivered[1]];
  tourDone("streams");
}

function drawStreams(now) {
  if ($("f-streams").disabled) return;
  for (let q = 0; q < 2; q++) {
    const id = 1 + 2 * q;
    const ago = S.st.last[q] ? Math.round(now - S.st.last[q]) + " ms ago" : "never";
    const held = q === 0 && now < S.st.heldUntil ? " · HELD at the Go peer (" + Math.ceil((S.st.heldUntil - now) / 1000) + " s)" : "";
    const el = $("st-" + id);
    el.textContent = "Stream " + id + " (data channel " + id + "): " + S.st.sent[q] + " Writes sent · " + S.st.delivered[q] +
      " delivered at the Go peer · last delivery " + ago + held;
    el.dataset.delivered = S.st.delivered[q];
    el.dataset.sent = S.st.sent[q];
  }
  const cv = $("st-chart");
  const g = cv.getContext("2d");
  g.clearRect(0, 0, cv.width, cv.height);
  const nb = CHART_SPAN / CHART_BIN, bw = cv.width / nb, b0 = Math.floor(now / CHART_BIN) - nb;
  for (let q = 0; q < 2; q++) {
    const y0 = q ? cv.height - 2 : cv.height / 2 - 4;
    g.fillStyle = q ? "#7b2d8e" : "#1f4fa8";
    for (const [b, n] of S.st.bins[q]) {
      const h = Math.min(28, n * 5);
      g.fillRect((b - b0) * bw, y0 - h, Math.max(1, bw - 1), h);
    }
  }
  if (S.st.heldUntil && now - S.st.heldUntil < CHART_SPAN) {
    const x = (t) => (t / CHART_BIN - b0) * bw;
    g.fillStyle = "rgba(161,22,27,.15)";
    g.fillRect(x(S.st.heldUntil - 3000), 0, x(S.st.heldUntil) - x(S.st.heldUntil - 3000), cv.height / 2);
  }
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

// longText is 1,000 octets of readable text: where each part lands is
// easy to see in the grid.
function longText(n) {
  let s = "";
  for (let i = 0; s.length < n; i++) s += "[" + String(i).padStart(3, "0") + " direct data placement] ";
  return s.slice(0, n);
}

function actLong() {
  const reg = remoteRegion($("w-stag").value);
  if (!reg) return log("No remote region to write to.", "err");
  const n = Math.min(1000, reg.len);
  S.tourWrite = true;
  doWrite(new TextEncoder().encode(longText(n)), reg.stag, reg.base);
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
  if (r) log("Send WR " + r.wrid + ": " + data.length + " octets" + (solicited ? ", Solicited Event" : "") + (inv ? ", invalidating " + hex(inv) : ""));
}

// The four Sends of RFC 5040 §4.3, each by its own name: no prefix of
// one name matches another.
const sendVariants = {
  "send": { solicited: false, invalidate: false },
  "send-se": { solicited: true, invalidate: false },
  "send-inv": { solicited: false, invalidate: true },
  "send-se-inv": { solicited: true, invalidate: true },
};

function actSend() {
  const v = sendVariants[$("s-variant").value];
  if (!v) return log("Unknown Send variant " + $("s-variant").value, "err");
  const inv = v.invalidate ? Number($("s-inv").value || 0) : 0;
  if (v.invalidate && !inv) return log("Choose the remote STag to invalidate.", "err");
  doSend(new TextEncoder().encode($("s-data").value), v.solicited, inv);
}

// ---------- Atomic Operations (RFC 7306) ----------

// word64 reads an 8-octet region as the number it holds, in the byte
// order of the machine that holds it (little-endian, both wasm and the
// Go peer's x86 or ARM), as RFC 7306's FetchAdd computes it.
function word64(r) {
  const b = b64bytes(r.data);
  if (b.length < 8) return null;
  return new DataView(b.buffer, b.byteOffset, 8).getBigUint64(0, true);
}

function counterRegion() {
  return S.remote.regions.find((r) => r.name === "Go peer counter");
}

function showCounter() {
  const c = counterRegion();
  const v = c ? word64(c) : null;
  let t = c ? "Go peer's counter: " + v : S.connected ? "This peer has no counter." : "Counter: not connected.";
  if (S.atomicOrig !== undefined) t += " · last original value returned: " + S.atomicOrig;
  const el = $("a-value");
  if (el.textContent !== t) el.textContent = t;
}

// atomicChanged shows a word that an atomic changed: a peer's Atomic
// Operation carried out by side's RDMAP, or side's own atomic add.
function atomicChanged(side, ev, now) {
  markCells(side, { region: ev.region, offset: ev.offset, len: 8 }, "pending", now);
  markCells(side, { region: ev.region, offset: ev.offset, len: 8 }, "delivered", now);
  const who = side === S.local ? "this tab" : S.mode === "go" ? "the Go peer" : "the peer";
  if (ev.kind === "local-atomic") log(who + ": " + ev.text);
  else log(who + "'s RDMAP carried out " + ev.op + " on STag " + hex(ev.stag) + " TO " + hex(ev.to, 4));
}

// atomicCompleted logs an Atomic's completion with the original value
// it brought back (the peer's word before the operation).
function atomicCompleted(ev) {
  S.atomicOrig = ev.orig;
  if (S.tourAtomic) tourDone("atomic");
  log((ev.op === "FETCH_ADD" ? "FetchAdd" : "CmpSwap") + " WR " + ev.wrid + " completed: the word held " + ev.orig + " before it");
  showCounter();
}

function actAtomic() {
  if (!needConn()) return;
  const reg = remoteRegion($("a-stag").value);
  if (!reg) return log("No remote region for the Atomic.", "err");
  const op = $("a-op").value, data = Number($("a-data").value), cmp = Number($("a-cmp").value);
  const to = reg.base + Number($("a-off").value);
  const r = check(iwarpPeer.atomic(op, reg.stag, to, data, cmp), "Atomic");
  if (r) log((op === "fetchadd" ? "FetchAdd " + data : "CmpSwap " + data + " if equal to " + cmp) + " WR " + r.wrid + " on STag " + hex(reg.stag) + " TO " + hex(to, 4));
}

function atomicOpChanged() {
  const swap = $("a-op").value === "cmpswap";
  $("a-data-l").textContent = swap ? "swap in" : "add";
  $("a-cmp-l").hidden = !swap;
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

// actAdvertise Sends the chosen region's descriptor in rdmap.RemoteBuffer's
// 16 octets (STag, TO, length, big-endian): the form iwarp serve and the
// examples put in the private data of their Accept.
function actAdvertise() {
  const stag = localStag();
  const reg = S.local.regions.find((r) => r.stag === stag);
  if (!reg) return;
  const b = new Uint8Array(16);
  const v = new DataView(b.buffer);
  v.setUint32(0, reg.stag);
  v.setBigUint64(4, BigInt(reg.base));
  v.setUint32(12, reg.len);
  log("Advertising " + advertText(reg.stag, reg.base, reg.len) + " in a Send: rdmap.RemoteBuffer's 16 octets, as iwarp serve advertises its region in its Accept");
  doSend(b, false, 0);
}

// advertText names a remote buffer descriptor.
function advertText(stag, to, len) { return "STag " + hex(stag) + " TO " + hex(to, 4) + " length " + len; }

// advertOf reads an rdmap.RemoteBuffer at the start of a receive buffer's
// data, if it names a region of either side; null otherwise.
function advertOf(data) {
  if (data.length < 16) return null;
  const v = new DataView(data.buffer, data.byteOffset, 16);
  const stag = v.getUint32(0), to = Number(v.getBigUint64(4)), len = v.getUint32(12);
  const known = [...S.local.regions, ...S.remote.regions].some((r) => !r.recv && r.stag === stag && r.base === to && r.len === len);
  return known ? advertText(stag, to, len) : null;
}

function goCmd(op, extra) {
  if (S.mode !== "go" || !S.connected) return log("Connect to the Go peer first.", "err");
  signal(Object.assign({ type: "go", op }, extra || {}));
}

function firstRemote() {
  const r = S.remote.regions.find((x) => !x.recv && x.valid && !x.qp);
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
    const free = S.remote.regions.filter((r) => r.recv && !r.filled && !r.qp).length;
    log("Fault: " + (free + 1) + " Sends for " + free + " posted receive buffers");
    for (let i = 0; i <= free; i++) doSend(new TextEncoder().encode("send #" + (i + 1)), false, 0);
  },
};

// ---------- the walk-through ----------

function tourDone(step) {
  if (S.tour.has(step)) return;
  S.tour.add(step);
  const li = document.querySelector('#tour-steps li[data-step="' + step + '"]');
  if (li) li.classList.add("done");
}

const tourSteps = {
  connect: () => {
    $("mulpdu").value = "48";
    $("unordered").checked = true;
    return connectGo();
  },
  reorder: () => { $("net-preset").value = "reordering path"; setImpair({ preset: "reordering path" }); },
  write: () => {
    if (!needConn()) return;
    const r = S.remote.regions.find((x) => !x.recv && !x.qp && x.len >= 1000);
    if (r) $("w-stag").value = String(r.stag);
    actLong();
  },
  send: () => {
    if (!needConn()) return;
    $("net-preset").value = "lossy Wi-Fi";
    setImpair({ preset: "lossy Wi-Fi" });
    S.tourSend = true;
    $("s-variant").value = "send";
    $("s-data").value = "untagged: placed in any order, delivered when whole";
    actSend();
  },
  atomic: () => {
    if (!needConn()) return;
    const c = counterRegion();
    if (!c) return log("This peer has no counter: connect to the Go peer.", "err");
    goCmd("increment");
    $("a-op").value = "fetchadd";
    atomicOpChanged();
    $("a-data").value = "1";
    $("a-stag").value = String(c.stag);
    $("a-off").value = "0";
    S.tourAtomic = true;
    actAtomic();
  },
  streams: () => {
    if (S.connected && S.streams > 1 && S.transport === "dc") { startSteady(); holdStream(); return; }
    $("two-streams").checked = true;
    $("transport").value = "dc";
    S.tourStreams = true;
    return connectGo();
  },
  mpa: () => { $("transport").value = "mpa"; $("markers").checked = true; return connectGo(); },
};

// ---------- start ----------

function wire() {
  const on = (id, f) => $(id).addEventListener("click", () => {
    try { const p = f(); if (p && p.catch) p.catch((e) => fail(e.message)); } catch (e) { fail(e.message); }
  });
  on("connect-go", connectGo);
  on("disconnect", () => {
    hangup(true);
    if (S.mode === "tab") signal({ type: "unpair" });
    stopObserving();
    S.mode = null;
    setStatus("idle", "Disconnected");
  });
  on("invite", () => signal({ type: "invite", purpose: "pair" }));
  on("share", () => signal({ type: "invite", purpose: "observe" }));
  on("join", () => {
    const c = $("code").value.replace(/\D+/g, "");
    if (c.length !== 6) return log("A code has six digits.", "err");
    signal({ type: "join", code: c });
  });
  on("observe", () => {
    const c = $("code").value.replace(/\D+/g, "");
    if (c.length !== 6) return log("A code has six digits.", "err");
    signal({ type: "observe", code: c });
  });
  on("do-write", actWrite);
  on("do-long", actLong);
  on("do-read", actRead);
  on("do-burst", actBurst);
  on("do-send", actSend);
  on("do-atomic", actAtomic);
  on("go-inc", () => goCmd("increment"));
  $("a-op").addEventListener("change", atomicOpChanged);
  on("do-register", actRegister);
  on("do-recv", () => { if (needConn()) check(iwarpPeer.postRecv(64), "post receive"); });
  on("do-advertise", actAdvertise);
  on("do-invalidate", () => { const s = localStag(); if (s) check(iwarpPeer.invalidate(s), "invalidate"); });
  on("do-deregister", () => { const s = localStag(); if (s) check(iwarpPeer.deregister(s), "deregister"); });
  on("go-register", () => goCmd("register", { len: 64, base: 0x4000, access: "rw" }));
  on("go-recv", () => goCmd("post-recv", { len: 64 }));
  on("go-invalidate", () => goCmd("invalidate", { stag: Number($("go-stag").value) }));
  on("go-deregister", () => goCmd("deregister", { stag: Number($("go-stag").value) }));
  on("go-bind", () => goCmd("bind", {
    stag: Number($("go-stag").value), offset: Number($("go-w-off").value),
    len: Number($("go-w-len").value), access: $("go-w-access").value,
  }));
  on("st-run", () => (S.st.timer ? stopSteady() : startSteady()));
  on("st-hold", holdStream);
  for (const id of Object.keys(faults)) on(id, faults[id]);
  $("net-preset").addEventListener("change", () => {
    const v = $("net-preset").value;
    setImpair(v === "custom" ? impairFromSliders() : { preset: v });
  });
  let t = 0;
  for (const k of ["loss", "delay", "jitter", "dup"]) {
    $("net-" + k).addEventListener("input", () => {
      $("net-preset").value = "custom";
      $("net-" + k + "-v").textContent = $("net-" + k).value + (k === "loss" || k === "dup" ? " %" : " ms");
      clearTimeout(t);
      S.netEditing = true;
      t = setTimeout(() => { S.netEditing = false; setImpair(impairFromSliders()); }, 150);
    });
  }
  for (const b of document.querySelectorAll("#tour-steps button[data-do]")) {
    b.addEventListener("click", () => {
      try { const p = tourSteps[b.dataset.do](); if (p && p.catch) p.catch((e) => fail(e.message)); } catch (e) { fail(e.message); }
    });
  }
  $("tour-hide").addEventListener("click", () => { $("tour").hidden = true; localStorage.setItem("iwarp-tour-hidden", "1"); });
  if (localStorage.getItem("iwarp-tour-hidden")) $("tour").hidden = true;
  const ex = $("explain");
  if (localStorage.getItem("iwarp-explained")) ex.open = false;
  ex.addEventListener("toggle", () => { if (!ex.open) localStorage.setItem("iwarp-explained", "1"); });
}

// When the second stream was asked for by the walk-through, start the
// steady Writes and the hold once both streams are up.
setInterval(() => {
  if (S.tourStreams && S.connected && S.streams > 1 && S.remote.regions.some((r) => r.qp === 1)) {
    S.tourStreams = false;
    startSteady();
    setTimeout(holdStream, 1000);
  }
}, 200);

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
streamsPanel();
setStatus("connecting", "Loading the browser peer…");
openSignaling();
loadWasm().catch((e) => fail("loading iwarp.wasm: " + e.message));
requestAnimationFrame(frame);
