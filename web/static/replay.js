// Replay mode of the demo page: a pcap or pcapng capture, dropped on the
// page, picked, or one of the bundled ones, is decoded here by the
// decoder of "iwarp dump" compiled into iwarp.wasm (globalThis
// iwarpReplay, wasm/replay.go; nothing is uploaded), and played on the
// demo's own picture: the initiator's memory on the left, the
// responder's on the right, the segments on the ladder between them.
// Each segment lands where DDP places it (an STag's buffer at TO, or the
// receive buffer its QN and MSN select, at MO), amber until DDP would
// deliver its message, then green. Events come from the wasm in chunks,
// so a capture of any length costs only what is on screen.
"use strict";

(() => {
  const $ = (id) => document.getElementById(id);
  const hex = (n, w = 8) => "0x" + Number(n).toString(16).padStart(w, "0");
  const MAX_FILE = 256 << 20;  // octets: larger files are refused before they reach the wasm
  const CHUNK = 2000;          // events fetched from the wasm at a time
  const LADDER_ROWS = 300;     // ladder rows kept
  const REGIONS = 10;          // buffers drawn per side; the least recently used goes
  const CQ_ROWS = 50;
  const SPEEDS = [1, 5, 25, 100, 1000, 5000, 20000];
  // Milliseconds a frame plays events for at most, so that the page
  // answers clicks (Pause among them) while it plays fast: a frame's
  // share of events past it is dropped, and the replay runs slower than
  // its speed. Firefox lets a page that plays from one frame into the
  // next answer nothing until the replay ends.
  const FRAME_BUDGET = 50;

  const R = {
    active: false, model: null, name: "", conn: null, cursor: 0, total: 0,
    keylog: null,            // the octets of a --keylog file, for DTLS captures
    playing: false, speed: 25, acc: 0, last: 0,
    chunks: new Map(),       // first event index of a chunk -> events
    regions: new Map(),      // buffer ID -> {div, cells, data, used, side}
    rows: new Map(),         // event index -> ladder li
    drawn: [],               // times of the segments drawn in the last second
    dirty: new Set(),        // buffers whose text view needs redrawing
  };

  // ---------- the panel ----------

  function panel() {
    const sec = document.createElement("section");
    sec.id = "replay";
    sec.className = "replay";
    sec.setAttribute("aria-labelledby", "replay-h");
    sec.innerHTML = `
      <h2 id="replay-h">Replay a capture</h2>
      <p class="hint">Drop a pcap or pcapng file on the page, or pick one: the page decodes it itself with the decoder of
        <code>iwarp dump</code>, compiled to WebAssembly (nothing is uploaded), and plays it on the picture below: MPA over TCP
        (IPv4, IPv6, Markers, CRCs) and DDP over SCTP (in IP or UDP). DDP over SCTP over DTLS 1.2 is decrypted here too,
        with the key log that <code>--keylog</code> wrote: pick it beside the capture, or drop both files
        (a <code>--pcap</code> recording needs none: it holds the SCTP packets before encryption).</p>
      <div class="conn">
        <label>Capture file <input type="file" id="rp-file" accept=".pcap,.pcapng,.cap,.dmp"></label>
        <label>Key log, for DTLS <input type="file" id="rp-keylog"></label>
        <label>or a bundled capture <select id="rp-bundled"><option value="">(choose one)</option></select></label>
        <button type="button" id="rp-load">Replay it</button>
      </div>
      <p id="rp-status" class="rate" role="status" aria-live="polite">No capture loaded.</p>
      <div id="rp-controls" class="conn" hidden>
        <label>Connection <select id="rp-conn"></select></label>
        <button type="button" id="rp-play">Play</button>
        <button type="button" id="rp-step">Step one segment</button>
        <label>Speed <select id="rp-speed"></select></label>
        <label>Jump to record <input id="rp-jump-n" type="number" min="1" size="7"></label>
        <button type="button" id="rp-jump">Jump</button>
        <button type="button" id="rp-end">To the end</button>
        <button type="button" id="rp-exit">Back to the live demo</button>
        <span id="rp-pos" class="rate" aria-live="off"></span>
        <span id="rp-rate" class="rate" aria-live="off"></span>
      </div>
      <div id="rp-startup" class="rp-startup"></div>`;
    const after = document.querySelector("header");
    after.after(sec);
    for (const v of SPEEDS) {
      const o = document.createElement("option");
      o.value = v;
      o.textContent = v + " segment" + (v > 1 ? "s" : "") + " a second";
      if (v === R.speed) o.selected = true;
      $("rp-speed").append(o);
    }
  }

  function status(text, kind) {
    const el = $("rp-status");
    el.textContent = text;
    el.className = "rate" + (kind ? " rp-" + kind : "");
    el.dataset.kind = kind || "";
  }

  async function bundled() {
    try {
      const r = await fetch("captures/index.json");
      if (!r.ok) return;
      for (const c of await r.json()) {
        const o = document.createElement("option");
        o.value = "captures/" + c.file;
        o.textContent = c.title + " (" + c.file + ")";
        $("rp-bundled").append(o);
      }
    } catch (e) {
      status("The bundled captures could not be listed: " + e.message, "err");
    }
  }

  // ---------- loading ----------

  async function decoder() {
    for (let i = 0; i < 300 && typeof iwarpReplay === "undefined"; i++) {
      if (i === 0) status("Waiting for the decoder (WebAssembly) to load…");
      await new Promise((r) => setTimeout(r, 100));
    }
    if (typeof iwarpReplay === "undefined") throw new Error("the decoder (iwarp.wasm) did not load");
    return iwarpReplay;
  }

  // isKeyLog tells a key log from a capture by its first line.
  async function isKeyLog(file) {
    const head = new TextDecoder().decode(await file.slice(0, 64).arrayBuffer());
    return /^(CLIENT_RANDOM |#)/.test(head);
  }

  async function loadFiles(files) {
    let capture = null;
    for (const f of files) {
      if (f.size < 1 << 20 && await isKeyLog(f)) R.keylog = new Uint8Array(await f.arrayBuffer());
      else capture = f;
    }
    if (capture) await loadFile(capture);
    else if (R.keylog) status("Key log read: now pick or drop the capture.", "ok");
  }

  async function loadFile(file) {
    if (file.size > MAX_FILE) {
      status(`${file.name} is ${(file.size / 2 ** 20).toFixed(0)} MiB; the page replays captures of up to ${MAX_FILE >> 20} MiB. ` +
        "Cut it first, for example: editcap -c 100000 " + file.name + " part.pcap (Wireshark's editcap), then replay the part.", "err");
      return;
    }
    status("Reading " + file.name + "…");
    await loadBytes(file.name, new Uint8Array(await file.arrayBuffer()));
  }

  async function loadURL(url) {
    status("Fetching " + url + "…");
    const r = await fetch(url);
    if (!r.ok) throw new Error(url + ": " + r.status + " " + r.statusText);
    const len = Number(r.headers.get("Content-Length") || 0);
    if (len > MAX_FILE) throw new Error(url + " is larger than " + (MAX_FILE >> 20) + " MiB");
    await loadBytes(url.split("/").pop(), new Uint8Array(await r.arrayBuffer()));
  }

  async function loadBytes(name, bytes) {
    const dec = await decoder();
    status("Decoding " + name + " (" + bytes.length.toLocaleString("en") + " octets)…");
    await new Promise((r) => requestAnimationFrame(() => setTimeout(r, 0))); // let the status show
    const t0 = performance.now();
    let s;
    try {
      s = JSON.parse(R.keylog ? dec.decode(bytes, R.keylog) : dec.decode(bytes));
    } catch (e) {
      status(name + ": the decoder failed: " + e.message, "err");
      return;
    }
    const ms = performance.now() - t0;
    if (s.error) {
      status(name + ": " + s.error, "err");
      return;
    }
    start(name, s, ms);
  }

  // ---------- entering replay ----------

  function start(name, model, ms) {
    if (!R.active) {
      // Leave the live demo: hang up through its own button.
      const d = $("disconnect");
      if (d && !d.disabled) d.click();
      document.body.classList.add("replaying");
      R.active = true;
    }
    if (typeof setStatus === "function") setStatus("ok", "Replaying a capture: " + name); // app.js's status line
    R.model = model; R.name = name; R.total = model.events; R.chunks = new Map();
    const sel = $("rp-conn");
    sel.textContent = "";
    for (const c of model.conns) {
      const o = document.createElement("option");
      o.value = c.id;
      o.textContent = "c" + c.capture_conn + " " + c.transport + " " + c.initiator + " ⇄ " + c.responder;
      sel.append(o);
    }
    $("rp-controls").hidden = false;
    const perConn = model.conns.length > 1 ? ", " + model.conns.length + " connections" : "";
    const errs = model.errors ? ` ${model.errors} record${model.errors > 1 ? "s" : ""} could not be decoded: see the ERROR rows on the ladder.` : "";
    status(`${name}: ${model.events.toLocaleString("en")} records, ${model.segments.toLocaleString("en")} segments, ` +
      `${model.delivered.toLocaleString("en")} messages delivered${perConn}; decoded in ${(ms / 1000).toFixed(2)} s.` + errs +
      (model.warning ? " Warning: " + model.warning : ""), model.warning || errs ? "warn" : "ok");
    $("rp-status").dataset.decodeMs = Math.round(ms);
    $("rp-status").dataset.segments = model.segments;
    selectConn(model.conns[0].id);
  }

  function conn(id) { return R.model.conns.find((c) => c.id === id); }

  function selectConn(id) {
    R.conn = conn(id);
    $("rp-conn").value = id;
    pause();
    reset();
    R.cursor = 0;
    showStartup();
    position();
  }

  function side(owner) { return owner === R.conn.initiator ? "local" : "remote"; }

  function reset() {
    const c = R.conn;
    const lh = $("local-h"), rh = $("remote-h");
    lh.firstChild.nodeValue = "Initiator ";
    rh.firstChild.nodeValue = "Responder ";
    $("local-sub").textContent = "(" + c.initiator + ")";
    $("remote-sub").textContent = "(" + c.responder + ")";
    for (const s of ["local", "remote"]) {
      $(s + "-regions").textContent = "";
      $(s + "-regions").dataset.key = "replay";
      const p = document.createElement("p");
      p.className = "empty";
      p.textContent = "Buffers appear as segments land in them.";
      $(s + "-regions").append(p);
      $(s + "-cq").textContent = "";
    }
    $("ladder").textContent = "";
    $("ladder-stats").textContent = "";
    $("ladder-help").textContent = "Replay of " + R.name + ": each row is one record of the capture, as iwarp dump numbers it (#n): → from the initiator, ← from the responder. " +
      "Amber cells: placed; green: delivered. Select a row for its headers.";
    $("detail").innerHTML = '<p class="hint">No segment selected.</p>';
    $("terminate").hidden = true;
    R.regions = new Map(); R.rows = new Map(); R.dirty = new Set();
  }

  function showStartup() {
    const c = R.conn, box = $("rp-startup");
    box.textContent = "";
    const h = document.createElement("h3");
    h.textContent = c.transport === "tcp" ? "MPA startup (RFC 5044 §7.1, RFC 6581)" : "DDP over SCTP (RFC 5043): session control messages are on the ladder";
    box.append(h);
    if (c.transport !== "tcp") return;
    const dl = document.createElement("dl");
    const frame = (f) => !f ? "not in the capture" :
      `revision ${f.rev}, M ${f.markers ? "1 (Markers required in the FPDUs sent to it)" : "0"}, C ${f.crc ? "1 (CRCs preferred)" : "0"}` + (f.reject ? ", REJECTED" : "") +
      (f.enhanced ? `, enhanced: IRD ${f.ird}, ORD ${f.ord}` + (f.peer_to_peer ? ", peer-to-peer, RTR " +
        ([f.send_rtr && "zero-length Send", f.write_rtr && "zero-length Write", f.read_rtr && "zero-length Read"].filter(Boolean).join(" or ") || "none") : "") : "") +
      `, ${atob(f.private_data || "").length} octets of private data` + privateText(f.private_data);
    for (const [k, v] of [["MPA Request (initiator)", frame(c.request)], ["MPA Reply (responder)", frame(c.reply)],
      ["Negotiated", c.request && c.reply ? `CRC ${c.crc ? "on" : "off"}; Markers towards the initiator ${c.markers_to_initiator ? "on" : "off"}, towards the responder ${c.markers_to_responder ? "on" : "off"}` : "–"]]) {
      const dt = document.createElement("dt"); dt.textContent = k;
      const dd = document.createElement("dd"); dd.textContent = v;
      dl.append(dt, dd);
    }
    box.append(dl);
  }

  function privateText(b64) {
    const s = atob(b64 || "");
    if (!s) return "";
    const shown = s.slice(0, 48).replace(/[^\x20-\x7e]/g, "·");
    return " (“" + shown + (s.length > 48 ? "…" : "") + "”)";
  }

  // ---------- events from the wasm ----------

  function event(i) {
    const k = i - (i % CHUNK);
    let c = R.chunks.get(k);
    if (!c) {
      c = JSON.parse(iwarpReplay.events(k, CHUNK));
      if (c.error) throw new Error(c.error);
      R.chunks.set(k, c);
      if (R.chunks.size > 4) {
        for (const key of R.chunks.keys()) { if (key !== k) { R.chunks.delete(key); break; } }
      }
    }
    return c[i - k];
  }

  // ---------- the picture ----------

  function cellText(v) {
    return v >= 0x21 && v <= 0x7e ? String.fromCharCode(v) : v === 0 ? "·" : v === 0x20 ? "␣" : v.toString(16).padStart(2, "0");
  }

  function buffer(id) { return R.model.buffers[id - 1]; }

  function bufferTitle(b) {
    if (b.tagged) return "STag " + hex(b.stag) + " (tagged buffer)";
    const q = b.qn === 0 ? "Send queue" : b.qn === 1 ? "Read Request queue" : b.qn === 2 ? "Terminate queue" : b.qn === 3 ? "Atomic Response queue" : "queue " + b.qn;
    return "Receive buffer QN " + b.qn + " (" + q + "), MSN " + b.msn;
  }

  // region returns a buffer's drawn region, made (from the state after
  // events [0, R.cursor)) when it is not on screen.
  function region(id) {
    let r = R.regions.get(id);
    if (r) { r.used = R.cursor; return r; }
    const b = buffer(id);
    const s = side(b.owner);
    const box = $(s + "-regions");
    box.querySelector(".empty")?.remove();
    const mine = [...R.regions.values()].filter((x) => x.side === s);
    if (mine.length >= REGIONS) {
      const old = mine.reduce((a, x) => (x.used < a.used ? x : a));
      old.div.remove();
      R.regions.delete(old.id);
    }
    const div = document.createElement("div");
    div.className = "region" + (b.tagged ? "" : " recv");
    Object.assign(div.dataset, { buffer: id, stag: b.stag, base: b.base, owner: b.owner, qn: b.qn, msn: b.msn, tagged: b.tagged ? 1 : 0, name: bufferTitle(b) });
    const h = document.createElement("h4");
    h.textContent = bufferTitle(b);
    const meta = document.createElement("p");
    meta.className = "meta";
    meta.textContent = (b.tagged ? "TO " + hex(b.base, 4) + " to " + hex(b.base + b.len, 4) + " as the traffic shows it" : "MO 0 to " + b.len) +
      " · " + b.len.toLocaleString("en") + " octets" + (b.shown < b.len ? ", the first " + b.shown + " drawn" : "") + " · in " + b.owner + "'s memory";
    const grid = document.createElement("div");
    grid.className = "grid" + (b.shown > 256 ? " wide" : "");
    grid.setAttribute("role", "img");
    grid.setAttribute("aria-label", "Contents of " + bufferTitle(b));
    for (let i = 0; i < b.shown; i++) {
      const c = document.createElement("span");
      c.className = "cell";
      c.textContent = "·";
      grid.append(c);
    }
    const text = document.createElement("p");
    text.className = "textview";
    // A buffer larger than its grid gets a bar of its whole extent, one
    // mark a segment at its place: the grid shows the first octets only.
    let bar = null;
    if (b.shown < b.len) {
      bar = document.createElement("div");
      bar.className = "rp-extent";
      bar.setAttribute("role", "img");
      bar.setAttribute("aria-label", "Where segments landed in all " + b.len + " octets");
    }
    div.append(h, meta, grid);
    if (bar) div.append(bar);
    div.append(text);
    box.prepend(div);
    r = { id, div, cells: grid.children, data: new Uint8Array(b.shown), used: R.cursor, side: s, text, bar, marks: new Map() };
    R.regions.set(id, r);
    if (R.cursor > 0) {
      const st = JSON.parse(iwarpReplay.snapshot(R.cursor, [id]))[0];
      if (st) {
        const d = Uint8Array.from(atob(st.data || ""), (ch) => ch.charCodeAt(0));
        for (let i = 0; i < d.length; i++) {
          r.data[i] = d[i];
          const c = r.cells[i];
          if (st.cells[i] === ".") continue;
          r.any = true;
          c.textContent = cellText(d[i]);
          c.classList.toggle("set", d[i] !== 0);
          c.classList.add(st.cells[i] === "d" ? "delivered" : "pending");
        }
      }
    }
    R.dirty.add(id);
    return r;
  }

  const BAR_MARKS = 200; // marks kept on a bar; the oldest go

  function mark(r, e) {
    if (!r.bar || r.marks.has(e.i)) return;
    const len = buffer(e.buffer).len;
    const m = document.createElement("span");
    m.className = "pending";
    m.style.left = (100 * e.offset / len) + "%";
    m.style.width = Math.max(0.3, 100 * (e.rec.payload_len || 0) / len) + "%";
    m.title = "#" + e.rec.n + ": " + (e.rec.payload_len || 0) + " octets at offset " + e.offset;
    m.dataset.n = e.rec.n;
    r.bar.append(m);
    r.marks.set(e.i, m);
    if (r.marks.size > BAR_MARKS) {
      const [k, old] = r.marks.entries().next().value;
      old.remove();
      r.marks.delete(k);
    }
  }

  function place(e) {
    const r = region(e.buffer);
    mark(r, e);
    const d = e.data ? Uint8Array.from(atob(e.data), (ch) => ch.charCodeAt(0)) : new Uint8Array(0);
    for (let i = 0; i < d.length; i++) {
      const k = e.offset + i;
      r.data[k] = d[i];
      const c = r.cells[k];
      c.textContent = cellText(d[i]);
      c.classList.toggle("set", d[i] !== 0);
      c.classList.remove("delivered");
      c.classList.add("pending");
    }
    r.any = true;
    r.div.dataset.last = "last placed: #" + e.rec.n + ", " + (e.rec.payload_len || 0) + " octets at offset " + e.offset;
    R.dirty.add(e.buffer);
  }

  function deliver(e) {
    const r = R.regions.get(e.buffer);
    const m = r && r.marks.get(e.i);
    if (m) m.className = "delivered";
    if (!r || !e.data) return;
    const n = atob(e.data).length;
    for (let i = 0; i < n; i++) {
      const c = r.cells[e.offset + i];
      c.classList.remove("pending");
      c.classList.add("delivered");
    }
  }

  function drawText() {
    for (const id of R.dirty) {
      const r = R.regions.get(id);
      if (!r) continue;
      let t = "";
      for (const v of r.data) t += v >= 0x20 && v <= 0x7e ? String.fromCharCode(v) : v === 0 ? "·" : "?";
      t = t.replace(/·+$/, "");
      r.text.textContent = "As text: " + (t.length > 200 ? t.slice(0, 200) + "…" : t || (r.any ? "(zero octets only)" : "(nothing placed yet)"));
    }
    R.dirty.clear();
  }

  // ---------- the ladder ----------

  function shortOp(op) {
    return ({ "RDMA Write": "Write", "RDMA Read Request": "ReadReq", "RDMA Read Response": "ReadResp",
      "Send with Solicited Event": "SendSE", "Send with Invalidate": "SendInv", "Send with Solicited Event and Invalidate": "SendSEInv",
      "Terminate": "Term", "Atomic Request": "AtomicReq", "Atomic Response": "AtomicResp" })[op] || op;
  }

  function rowText(e) {
    const r = e.rec, out = r.src === R.conn.initiator;
    const dir = out ? "→ " : "← ";
    let t = dir + "#" + r.n + " ";
    if (e.kind === "frame") return t + (r.kind === "mpa_request" ? "MPA Request" : "MPA Reply") + " · " + r.len + " octets";
    if (e.kind === "control") return t + r.function + " · DDP-SSN " + r.ddp_ssn;
    if (e.kind === "error") return t + "ERROR: " + r.note;
    const d = r.ddp;
    if (!d) return t + "segment: " + r.note;
    const where = d.tagged ? "STag " + hex(d.stag) + " TO " + hex(d.to, 4) : "QN " + d.qn + " MSN " + d.msn + " MO " + d.mo;
    t += (r.transport === "tcp" ? "FPDU" : "SSN " + r.ddp_ssn) + " " + shortOp(r.op) + " " + where + " " + (r.payload_len || 0) + "B" + (d.last ? " L" : "");
    if (r.crc === "bad") t += " · BAD CRC";
    if (e.rtr) t += " · RTR";
    if (r.terminate) t += " · " + r.terminate.layer_name + " / " + r.terminate.name;
    if (e.answers >= 0) t += " · answers #" + (e.answers + 1);
    return t;
  }

  function ladderRow(e, frag) {
    const r = e.rec;
    const li = document.createElement("li");
    const out = r.src === R.conn.initiator;
    li.className = (out ? "out" : "in") + (r.ddp ? (r.ddp.tagged ? " tagged" : " untagged") : " fpdu frame") +
      (r.terminate || e.kind === "error" || r.crc === "bad" ? " term" : "");
    const ds = li.dataset;
    ds.i = e.i; ds.n = r.n; ds.kind = r.kind;
    if (r.ddp) {
      Object.assign(ds, { tagged: r.ddp.tagged ? 1 : 0, last: r.ddp.last ? 1 : 0, stag: r.ddp.stag, to: r.ddp.to, qn: r.ddp.qn, msn: r.ddp.msn, mo: r.ddp.mo, opcode: r.opcode });
    }
    if (r.crc) ds.crc = r.crc;
    if (r.terminate) ds.term = r.terminate.layer + "/" + r.terminate.etype + "/" + r.terminate.ecode;
    if (e.buffer) { ds.buffer = e.buffer; ds.offset = e.offset; }
    if (e.refused) ds.refused = 1;
    const b = document.createElement("button");
    b.type = "button";
    const main = document.createElement("span");
    main.className = "seg";
    main.textContent = rowText(e);
    const st = document.createElement("span");
    st.className = "arr";
    st.textContent = e.buffer ? "placed" : e.refused ? "refused" : e.why ? "not placed" : r.ddp ? "0 octets" : "";
    if (e.why) st.title = e.why;
    b.append(main, " ", st);
    b.addEventListener("click", () => select(e.i, b));
    li.append(b);
    li.status = st;
    frag.append(li);
    R.rows.set(e.i, li);
    return li;
  }

  function markDelivered(i) {
    const li = R.rows.get(i);
    if (!li) return;
    li.classList.add("delivered");
    li.dataset.delivered = 1;
    li.status.textContent = (li.dataset.buffer ? "placed · " : "") + "dlvd";
  }

  function flushRows(frag) {
    if (!frag.childNodes.length) return;
    const ol = $("ladder");
    ol.append(frag);
    while (ol.children.length > LADDER_ROWS) {
      const li = ol.firstChild;
      R.rows.delete(Number(li.dataset.i));
      li.remove();
    }
    ol.scrollTop = ol.scrollHeight;
  }

  function select(i, btn) {
    document.querySelectorAll("#ladder button[aria-pressed='true']").forEach((x) => x.setAttribute("aria-pressed", "false"));
    if (btn) btn.setAttribute("aria-pressed", "true");
    const e = event(i), r = e.rec;
    const rows = [["Record (iwarp dump's n)", r.n], ["Time", r.time + " (+" + e.t.toFixed(6) + " s)"], ["Connection", "c" + r.conn + " " + r.transport],
      ["From", r.src], ["To", r.dst], ["Kind", r.kind], ["Length", r.len + " octets"]];
    if (r.crc) rows.push(["CRC", r.crc]);
    if (r.sctp_stream !== undefined) rows.push(["SCTP stream", r.sctp_stream]);
    if (r.ddp_ssn !== undefined) rows.push(["DDP-SSN", r.ddp_ssn]);
    if (r.function) rows.push(["Function", r.function]);
    if (r.ddp) {
      const d = r.ddp;
      rows.push(["Tagged (T)", d.tagged ? 1 : 0], ["Last (L)", d.last ? 1 : 0]);
      if (d.tagged) rows.push(["STag", hex(d.stag)], ["Tagged Offset (TO)", hex(d.to, 4)]);
      else rows.push(["Queue Number (QN)", d.qn], ["MSN", d.msn], ["Message Offset (MO)", d.mo]);
      rows.push(["RDMAP opcode", r.opcode + " (" + r.op + ")"], ["Payload", (r.payload_len || 0) + " octets"]);
    }
    if (r.read_request) {
      const q = r.read_request;
      rows.push(["Data Sink STag", hex(q.sink_stag)], ["Data Sink TO", hex(q.sink_to, 4)], ["RDMA Read Message Size", q.size],
        ["Data Source STag", hex(q.src_stag)], ["Data Source TO", hex(q.src_to, 4)]);
    }
    if (r.atomic) {
      const a = r.atomic;
      rows.push(["AOpCode", a.aopcode + " (" + a.aop + ")"], ["Request Identifier", a.request_id], ["Remote STag", hex(a.stag)], ["Remote TO", hex(a.to, 4)]);
      if (a.add_data !== undefined) rows.push(["Add Data", a.add_data], ["Add Mask", a.add_mask]);
      if (a.swap_data !== undefined) rows.push(["Swap Data", a.swap_data], ["Swap Mask", a.swap_mask]);
      rows.push(["Compare Data", a.compare_data], ["Compare Mask", a.compare_mask]);
    }
    if (r.atomic_response) rows.push(["Original Request Identifier", r.atomic_response.original_request_id], ["Original Remote Data Value", r.atomic_response.original_value]);
    if (r.immediate_data !== undefined) rows.push(["Immediate Data", r.immediate_data]);
    if (r.invalidate_stag !== undefined) rows.push(["Invalidate STag", hex(r.invalidate_stag)]);
    if (r.terminate) {
      const t = r.terminate;
      rows.push(["Terminate Layer", t.layer + " (" + t.layer_name + ")"], ["Error Type", t.etype], ["Error Code", hex(t.ecode, 2)], ["Error", t.name]);
    }
    if (e.terminated) {
      const th = e.terminated;
      rows.push(["Terminated DDP header", (th.tagged ? "STag " + hex(th.stag) + " TO " + hex(th.to, 4) : "QN " + th.qn + " MSN " + th.msn + " MO " + th.mo) +
        (th.siw ? " (read in Linux siw's layout: " + th.layer + "/" + th.etype + "/" + hex(th.ecode, 2) + ", " + th.name + ")" : "")]);
    }
    if (e.answers >= 0) rows.push([r.terminate ? "Names the segment" : "Answers", "#" + (e.answers + 1)]);
    if (e.buffer) rows.push(["Placed into", bufferTitle(buffer(e.buffer)) + " at offset " + e.offset]);
    if (e.why) rows.push(["Not placed", e.why]);
    if (e.rtr) rows.push(["RTR", "the zero-length message that ends the enhanced MPA startup (RFC 6581)"]);
    if (e.delivered && e.delivered.length) rows.push(["Delivers", e.delivered.map((j) => "#" + (j + 1)).join(", ")]);
    rows.push(["Note", r.note]);
    const dl = document.createElement("dl");
    for (const [k, v] of rows) {
      const dt = document.createElement("dt"); dt.textContent = k;
      const dd = document.createElement("dd"); dd.textContent = String(v);
      dl.append(dt, dd);
    }
    const box = $("detail");
    box.textContent = "";
    const h = document.createElement("h3");
    h.textContent = "Record #" + r.n;
    box.append(h, dl);
    if (e.answers >= 0) {
      const go = document.createElement("button");
      go.type = "button";
      go.textContent = "Show #" + (e.answers + 1);
      go.addEventListener("click", () => { const li = R.rows.get(e.answers); if (li) { li.scrollIntoView({ block: "nearest" }); select(e.answers, li.querySelector("button")); } else select(e.answers, null); });
      box.append(go);
    }
  }

  // ---------- playing ----------

  function addCQ(e, last) {
    const r = e.rec;
    const ol = $(side(r.dst) + "-cq");
    const li = document.createElement("li");
    li.className = "ok";
    const b = buffer(e.buffer);
    li.textContent = "✔ #" + last.rec.n + " delivers " + r.op + " · " + (b ? bufferTitle(b) : "zero octets" + (e.rtr ? ", the RTR" : ""));
    ol.prepend(li);
    while (ol.children.length > CQ_ROWS) ol.lastChild.remove();
  }

  function showTerminate(e) {
    const t = e.rec.terminate, box = $("terminate");
    box.hidden = false;
    box.innerHTML = "";
    const h = document.createElement("h2");
    h.textContent = "Terminate in the capture (#" + e.rec.n + ")";
    const dl = document.createElement("dl");
    const named = e.answers >= 0 ? "#" + (e.answers + 1) : e.terminated ? "no segment of the capture carries its DDP header" : "it carries no DDP header";
    for (const [k, v] of [["From", e.rec.src], ["Layer", t.layer_name + " (" + t.layer + ")"], ["Error type / code", t.etype + " / " + hex(t.ecode, 2)],
      ["Error", t.name], ["Siw's reading", e.terminated && e.terminated.siw ? e.terminated.name + " (" + e.terminated.layer + "/" + e.terminated.etype + "/" + hex(e.terminated.ecode, 2) + ")" : "–"],
      ["The segment it names", named]]) {
      const dt = document.createElement("dt"); dt.textContent = k;
      const dd = document.createElement("dd"); dd.textContent = v;
      dl.append(dt, dd);
    }
    box.append(h, dl);
    const li = R.rows.get(e.answers);
    if (li) li.classList.add("named");
  }

  // play applies the next event of the selected connection; false at
  // the end.
  function play(frag) {
    while (R.cursor < R.total) {
      const e = event(R.cursor);
      R.cursor++;
      if (e.conn !== R.conn.id) continue;
      ladderRow(e, frag);
      if (e.buffer) place(e);
      if (e.delivered) {
        for (const j of e.delivered) {
          const s = event(j);
          deliver(s);
          markDelivered(j);
          if (s.rec.ddp && s.rec.ddp.last) addCQ(s, e);
        }
      }
      if (e.rec.terminate) showTerminate(e);
      if (e.kind === "segment") R.drawn.push(performance.now());
      return true;
    }
    return false;
  }

  function position() {
    const n = R.cursor;
    $("rp-pos").textContent = n >= R.total ? "At the end (" + R.total + " records)." : "Next: record #" + (n + 1) + " of " + R.total + ".";
    $("rp-pos").dataset.cursor = n;
  }

  function frame(now) {
    requestAnimationFrame(frame);
    if (!R.active) return;
    if (R.playing) {
      R.acc += Math.min(now - R.last, 250) * R.speed / 1000;
      R.last = now;
      let k = Math.floor(R.acc);
      R.acc -= k;
      const frag = document.createDocumentFragment();
      const until = performance.now() + FRAME_BUDGET;
      while (k-- > 0) {
        if (!play(frag)) { pause(); break; }
        if (performance.now() > until) { R.acc = 0; break; }
      }
      flushRows(frag);
      position();
    }
    drawText();
    let i = 0;
    while (i < R.drawn.length && R.drawn[i] < now - 1000) i++;
    if (i) R.drawn.splice(0, i);
    $("rp-rate").textContent = "Segments drawn in the last second: " + R.drawn.length;
    $("rp-rate").dataset.rate = R.drawn.length;
  }

  function pause() {
    R.playing = false;
    $("rp-play").textContent = "Play";
  }

  function togglePlay() {
    if (R.playing) return pause();
    if (R.cursor >= R.total) jump(0);
    R.playing = true; R.last = performance.now(); R.acc = 1;
    $("rp-play").textContent = "Pause";
  }

  function step() {
    pause();
    const frag = document.createDocumentFragment();
    play(frag);
    flushRows(frag);
    position();
  }

  // jump shows the picture after events [0, n): the buffers the last
  // records touched, from a snapshot, and the ladder's last rows.
  function jump(n) {
    pause();
    n = Math.max(0, Math.min(n, R.total));
    reset();
    R.cursor = n;
    const from = Math.max(0, n - 60);
    const frag = document.createDocumentFragment();
    const recent = [];
    for (let i = from; i < n; i++) {
      const e = event(i);
      if (e.conn !== R.conn.id) continue;
      ladderRow(e, frag);
      if (e.buffer) recent.push(e.buffer);
      for (const j of e.delivered || []) markDelivered(j);
      if (e.rec.terminate) showTerminate(e);
    }
    flushRows(frag);
    // Older buffers first, so that the newest end on top.
    const seen = new Set();
    for (const id of recent.reverse()) seen.add(id);
    for (const id of [...seen].reverse().slice(-2 * REGIONS)) region(id);
    // The bars of large buffers: the last records' marks.
    for (let i = from; i < n; i++) {
      const e = event(i);
      if (e.conn !== R.conn.id) continue;
      const r = e.buffer && R.regions.get(e.buffer);
      if (r) mark(r, e);
      for (const j of e.delivered || []) {
        const d = event(j), rr = R.regions.get(d.buffer), m = rr && rr.marks.get(j);
        if (m) m.className = "delivered";
      }
    }
    drawText();
    position();
  }

  function wire() {
    $("rp-file").addEventListener("change", () => { const f = $("rp-file").files[0]; if (f) loadFile(f).catch((e) => status(e.message, "err")); });
    $("rp-keylog").addEventListener("change", async () => {
      const f = $("rp-keylog").files[0];
      if (!f) return;
      if (f.size > 1 << 20) return status(f.name + " is too large for a key log.", "err");
      R.keylog = new Uint8Array(await f.arrayBuffer());
      const c = $("rp-file").files[0];
      if (c) loadFile(c).catch((e) => status(e.message, "err"));
      else status("Key log read: now pick or drop the capture.", "ok");
    });
    $("rp-load").addEventListener("click", () => {
      const v = $("rp-bundled").value;
      if (!v) return status("Choose a bundled capture first, or pick a file.", "err");
      loadURL(v).catch((e) => status(e.message, "err"));
    });
    $("rp-conn").addEventListener("change", () => selectConn(Number($("rp-conn").value)));
    $("rp-play").addEventListener("click", togglePlay);
    $("rp-step").addEventListener("click", step);
    $("rp-speed").addEventListener("change", () => { R.speed = Number($("rp-speed").value); });
    $("rp-jump").addEventListener("click", () => {
      const n = Number($("rp-jump-n").value);
      if (!Number.isInteger(n) || n < 1 || n > R.total) return status("Jump: a record number from 1 to " + R.total + ".", "err");
      jump(n);
    });
    $("rp-end").addEventListener("click", () => jump(R.total));
    $("rp-exit").addEventListener("click", () => { location.href = location.pathname; });
    document.addEventListener("dragover", (ev) => { ev.preventDefault(); document.body.classList.add("rp-drop"); });
    document.addEventListener("dragleave", () => document.body.classList.remove("rp-drop"));
    document.addEventListener("drop", (ev) => {
      ev.preventDefault();
      document.body.classList.remove("rp-drop");
      const fs = ev.dataTransfer ? [...ev.dataTransfer.files] : [];
      if (fs.length) loadFiles(fs).catch((e) => status(e.message, "err"));
    });
  }

  panel();
  wire();
  bundled();
  requestAnimationFrame(frame);
  const q = new URLSearchParams(location.search).get("capture");
  if (q && /^[\w./-]+$/.test(q) && !q.includes("..")) loadURL(q).catch((e) => status(e.message, "err"));

  // For the browser test and the console: the records played, as rows.
  globalThis.iwarpReplayPage = { jump, step, selectConn, get cursor() { return R.cursor; }, get total() { return R.total; } };
})();
