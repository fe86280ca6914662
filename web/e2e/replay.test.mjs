// End-to-end test of the demo page's Replay mode in Debian's chromium or
// firefox-esr (IWARP_BROWSER; browser.mjs). cmd/iwarp's TestReplayInBrowser serves the
// page and writes, in IWARP_REPLAY_DATA, each bundled capture with what
// "iwarp dump --json" prints for it (NAME.dump.jsonl) and the octets
// each RDMA Write and Read Response carries (NAME.placed.json), the bad
// files, and a capture of 100,000 FPDUs.
//
//	node replay.test.mjs http://127.0.0.1:8080/
//
// For each bundled capture (IWARP_REPLAY_CAPTURES, a JSON list), chosen
// in the menu and then dropped on the page as a file: step through every
// record, and check after each Write
// or Read Response that its octets are in its buffer's cells at TO minus
// the buffer's base; at the end, that the ladder has one row per record
// with the fields dump prints (STag, TO, QN, MSN, MO, opcode, L, CRC,
// the Terminate triple). Then: each bad file gives its message and the
// page still replays; the 100,000 FPDUs decode in under 5 s and play at
// 1,000 segments drawn a second or more, and Pause stops them where
// they are; a DTLS capture is refused, then
// decrypted with its key log; ?capture= loads a capture as
// "iwarp replay" serves it. Screenshots go to IWARP_ARTIFACTS.
import { launch } from "./browser.mjs";
import { mkdirSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";

const url = process.argv[2];
const out = process.env.IWARP_ARTIFACTS || ".artifacts/replay-e2e";
const data = process.env.IWARP_REPLAY_DATA;
const captures = JSON.parse(process.env.IWARP_REPLAY_CAPTURES || "[]");
const minRate = Number(process.env.IWARP_E2E_MIN_RATE || 1000);
const maxDecodeMs = Number(process.env.IWARP_E2E_MAX_DECODE_MS || 5000);
if (!url || !data || !captures.length) {
  console.error("usage: IWARP_REPLAY_DATA=dir IWARP_REPLAY_CAPTURES='[...]' node replay.test.mjs URL");
  process.exit(2);
}
rmSync(out, { recursive: true, force: true });
mkdirSync(out, { recursive: true });

const T = 20000;
let failures = 0;
const t0 = Date.now();
function step(name) { console.log(`-- [${((Date.now() - t0) / 1000).toFixed(1)} s]`, name); }
function fail(msg) { failures++; console.log("FAIL:", msg); }

async function loaded(page, what, kinds = ["ok", "warn"]) {
  await page.waitForFunction((ks) => ks.includes(document.getElementById("rp-status").dataset.kind), kinds, { timeout: T * 3 })
    .catch(() => {});
  const s = await page.evaluate(() => ({ kind: document.getElementById("rp-status").dataset.kind, text: document.getElementById("rp-status").textContent }));
  if (!kinds.includes(s.kind)) throw new Error(`${what}: status ${s.kind}: ${s.text}`);
  return s;
}

async function chooseBundled(page, name) {
  await page.selectOption("#rp-bundled", "captures/" + name);
  await page.evaluate(() => { document.getElementById("rp-status").dataset.kind = ""; });
  await page.click("#rp-load");
  return loaded(page, name);
}

// dropFile drops a file of IWARP_REPLAY_DATA on the page, as a person
// drags it from a file manager, and waits for the page's verdict.
async function dropFile(page, name) {
  const b64 = readFileSync(join(data, name)).toString("base64");
  await page.evaluate(([name, b64]) => {
    document.getElementById("rp-status").dataset.kind = "";
    const dt = new DataTransfer();
    dt.items.add(new File([Uint8Array.from(atob(b64), (c) => c.charCodeAt(0))], name));
    for (const type of ["dragenter", "dragover", "drop"]) {
      document.body.dispatchEvent(new DragEvent(type, { bubbles: true, cancelable: true, dataTransfer: dt }));
    }
  }, [name, b64]);
  return loaded(page, name + " dropped");
}

// checkCapture plays a bundled capture record by record, chosen in the
// menu or dropped.
async function checkCapture(page, name, dropped) {
  step((dropped ? "dropped capture " : "bundled capture ") + name);
  if (dropped) await dropFile(page, name);
  else await chooseBundled(page, name);
  const dump = readFileSync(join(data, name + ".dump.jsonl"), "utf8").trim().split("\n").map((l) => JSON.parse(l));
  const placed = new Map(JSON.parse(readFileSync(join(data, name + ".placed.json"), "utf8")).map((p) => [p.n, p]));
  const conns = await page.evaluate(() => [...document.querySelectorAll("#rp-conn option")].map((o) => Number(o.value)));
  const rows = [];
  let checkedBytes = 0;
  for (const c of conns) {
    await page.evaluate((c) => iwarpReplayPage.selectConn(c), c);
    await page.click("#rp-step"); // the button; the rest of the way in the page, a step at a time
    const res = await page.evaluate(([placed]) => {
      const cellText = (v) => v >= 0x21 && v <= 0x7e ? String.fromCharCode(v) : v === 0 ? "·" : v === 0x20 ? "␣" : v.toString(16).padStart(2, "0");
      const byN = new Map(placed.map((p) => [p.n, p]));
      const problems = [];
      let checked = 0;
      const check = () => {
        const li = document.querySelector("#ladder li:last-child");
        const p = li && byN.get(Number(li.dataset.n));
        if (!p) return;
        const r = [...document.querySelectorAll(".region[data-tagged='1']")].find((d) => d.dataset.owner === p.owner && Number(d.dataset.stag) === p.stag);
        if (!r) { problems.push(`#${p.n}: no region for STag ${p.stag} in ${p.owner}'s memory`); return; }
        const off = p.to - Number(r.dataset.base);
        const cells = r.querySelectorAll(".cell");
        const n = Math.min(p.hex.length / 2, Math.max(0, cells.length - off));
        for (let i = 0; i < n; i++) {
          const want = cellText(parseInt(p.hex.slice(2 * i, 2 * i + 2), 16));
          const got = cells[off + i].textContent;
          if (got !== want) { problems.push(`#${p.n}: cell ${off + i} (TO ${p.to} + ${i}) shows ${JSON.stringify(got)}, the segment carries ${JSON.stringify(want)}`); return; }
        }
        if (n > 0) checked++;
      };
      check();
      while (iwarpReplayPage.cursor < iwarpReplayPage.total) { iwarpReplayPage.step(); check(); }
      return { problems, checked, rows: [...document.querySelectorAll("#ladder li")].map((li) => ({ ...li.dataset })) };
    }, [[...placed.values()]]);
    for (const p of res.problems) fail(name + " " + p);
    checkedBytes += res.checked;
    rows.push(...res.rows);
  }
  if (rows.length !== dump.length) fail(`${name}: ${rows.length} rows on the ladder, dump prints ${dump.length} records`);
  const byN = new Map(rows.map((r) => [Number(r.n), r]));
  let fields = 0;
  for (const d of dump) {
    const r = byN.get(d.n);
    if (!r) { fail(`${name}: no row for record ${d.n}`); continue; }
    const want = { kind: d.kind };
    if (d.ddp) {
      Object.assign(want, { tagged: d.ddp.tagged ? "1" : "0", last: d.ddp.last ? "1" : "0", stag: String(d.ddp.stag), to: String(d.ddp.to),
        qn: String(d.ddp.qn), msn: String(d.ddp.msn), mo: String(d.ddp.mo), opcode: String(d.opcode) });
    }
    if (d.crc) want.crc = d.crc;
    if (d.terminate) want.term = d.terminate.layer + "/" + d.terminate.etype + "/" + d.terminate.ecode;
    for (const [k, v] of Object.entries(want)) {
      fields++;
      if (r[k] !== v) fail(`${name} record ${d.n}: ${k} is ${r[k]}, dump says ${v}`);
    }
    // A segment a Terminate names was refused: nothing of it is placed or delivered.
    if (r.refused === "1" && (r.delivered === "1" || r.buffer)) fail(`${name} record ${d.n}: refused, yet placed or delivered`);
    if (d.ddp && d.ddp.last && d.crc !== "bad" && r.refused !== "1" && r.delivered !== "1") fail(`${name} record ${d.n}: its message was never marked delivered`);
  }
  console.log(`   ${dump.length} records, ${fields} fields agree with iwarp dump, ${checkedBytes} Writes and Read Responses found in the grids`);
  if ([...placed.values()].some((p) => p.hex) && !checkedBytes) fail(`${name}: no placed octets were checked`);
  await page.screenshot({ path: join(out, (dropped ? "replay-dropped-" : "replay-") + name + ".png"), fullPage: true });
}

async function pick(page, file) {
  await page.evaluate(() => { document.getElementById("rp-status").dataset.kind = ""; });
  await page.setInputFiles("#rp-file", join(data, file));
}

const browser = await launch({ chromiumArgs: ["--no-sandbox"] });
try {
  const page = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  page.on("pageerror", (e) => fail("page error: " + e.message));
  await page.goto(url);
  await page.waitForFunction(() => document.querySelectorAll("#rp-bundled option").length > 1, null, { timeout: T });
  const offered = await page.evaluate(() => [...document.querySelectorAll("#rp-bundled option")].map((o) => o.value).filter(Boolean));
  for (const c of captures) if (!offered.includes("captures/" + c)) fail("the menu does not offer " + c);

  for (const dropped of [false, true]) {
    for (const c of captures) {
      try { await checkCapture(page, c, dropped); } catch (e) { fail(c + (dropped ? " dropped" : "") + ": " + e.message); }
    }
  }

  step("a Terminate names its segment, a Read Response its Request (siw)");
  await chooseBundled(page, "siw-terminate.pcap");
  await page.click("#rp-end");
  await page.click("#ladder li[data-n='12'] button");
  const det = await page.textContent("#detail");
  if (!det.includes("Names the segment#11")) fail("the siw Terminate's detail does not name #11: " + det.slice(0, 300));
  if (!(await page.textContent("#terminate")).includes("#11")) fail("the Terminate box does not name #11");
  await page.click("#ladder li[data-n='5'] button");
  if (!(await page.textContent("#detail")).includes("Answers#4")) fail("the Read Response does not answer #4");
  await page.screenshot({ path: join(out, "replay-siw-terminate-detail.png"), fullPage: true });

  step("a Send placed before it is delivered (lab 11 step 4)");
  await chooseBundled(page, "perf-send-tcp-markers.pcap");
  const msn3 = async () => page.evaluate(() => {
    const r = [...document.querySelectorAll("#remote-regions .region")].find((d) => d.dataset.tagged === "0" && d.dataset.qn === "0" && d.dataset.msn === "3");
    if (!r) return null;
    const c = [...r.querySelectorAll(".cell")];
    return { pending: c.filter((x) => x.classList.contains("pending")).length, delivered: c.filter((x) => x.classList.contains("delivered")).length, cq: document.getElementById("remote-cq").textContent };
  });
  await page.fill("#rp-jump-n", "9");
  await page.click("#rp-jump");
  const before = await msn3();
  if (!before || before.pending !== 512 || before.delivered !== 0) fail("after #8 and #9 the Send's cells should all be placed, none delivered: " + JSON.stringify(before));
  await page.click("#rp-step");
  const after = await msn3();
  if (!after || after.delivered !== 512 || after.pending !== 0 || !after.cq.includes("#10 delivers Send")) fail("after #10 the Send should be delivered: " + JSON.stringify(after));
  // The grid shows the first 512 of 70,000 octets; the bar under it all
  // three segments, each at MO / 70,000 of its width.
  const marks = await page.evaluate(() => [...document.querySelectorAll("#remote-regions .region[data-msn='3'] .rp-extent span")].map((m) => [m.dataset.n, m.className, parseFloat(m.style.left)]));
  const wantMarks = [["8", "delivered", 0], ["9", "delivered", 100 * 32744 / 70000], ["10", "delivered", 100 * 65488 / 70000]];
  if (marks.length !== 3 || marks.some((m, i) => m[0] !== wantMarks[i][0] || m[1] !== wantMarks[i][1] || Math.abs(m[2] - wantMarks[i][2]) > 0.01)) fail("the MSN 3 buffer's bar: " + JSON.stringify(marks));
  await page.screenshot({ path: join(out, "replay-send-delivered.png"), fullPage: true });

  step("bad files: each says what is wrong, the page stays usable");
  for (const [file, kinds, text] of [
    ["truncated.pcap", ["warn"], "truncated"],
    ["unknown-blocks.pcapng", ["ok"], "12 records"],
    ["no-iwarp.pcap", ["err"], "no iWARP traffic"],
    ["random.pcap", ["err"], "not a valid pcap or pcapng file"],
    ["huge.pcap", ["err"], "the page replays captures of up to 256 MiB"],
  ]) {
    await pick(page, file);
    let s;
    try { s = await loaded(page, file, kinds); } catch (e) { fail(e.message); continue; }
    if (!s.text.includes(text)) fail(`${file}: status ${JSON.stringify(s.text)} should say ${JSON.stringify(text)}`);
    else console.log(`   ${file}: ${s.text.slice(0, 160)}`);
    await page.screenshot({ path: join(out, "replay-bad-" + file + ".png") });
    try { await chooseBundled(page, "rping-tcp.pcap"); } catch (e) { fail(`after ${file} the page no longer replays: ${e.message}`); }
  }

  step("DDP over SCTP over DTLS with its key log, decrypted in the page");
  await pick(page, "dtls-cert.pcapng");
  const enc = await loaded(page, "dtls-cert.pcapng without its key log", ["err"]);
  if (!enc.text.includes("give the key log")) fail("an encrypted capture without its key log: " + enc.text);
  // Given the key log, the page decodes the capture already picked again
  // (picking the same file twice fires no change event).
  await page.setInputFiles("#rp-keylog", join(data, "dtls-cert.keylog"));
  const dec = await loaded(page, "dtls-cert.pcapng with its key log", ["warn"]);
  if (!dec.text.includes("12 records, 8 segments, 8 messages delivered") || !dec.text.includes("DTLS records decrypted with the key log")) fail("decrypted: " + dec.text);
  else console.log("   " + dec.text);
  await page.click("#rp-end");
  const writes = await page.evaluate(() => document.querySelectorAll("#ladder li[data-opcode='0'][data-delivered='1']").length);
  if (writes < 2) fail(`the decrypted session shows ${writes} delivered Writes, want 2 or more`);
  await page.screenshot({ path: join(out, "replay-dtls.png"), fullPage: true });

  step("100,000 FPDUs: decoded in the page, played at speed");
  await pick(page, "fpdus-100000.pcap");
  const s = await loaded(page, "fpdus-100000.pcap");
  const ms = await page.evaluate(() => Number(document.getElementById("rp-status").dataset.decodeMs));
  const segs = await page.evaluate(() => Number(document.getElementById("rp-status").dataset.segments));
  console.log(`   ${s.text}`);
  if (segs !== 100000) fail(`${segs} segments decoded, want 100000`);
  if (!(ms < maxDecodeMs)) fail(`decoding took ${ms} ms, more than ${maxDecodeMs}`);
  step("play");
  await page.selectOption("#rp-speed", "5000");
  await page.click("#rp-play");
  await page.waitForTimeout(2500);
  const rate = await page.evaluate(() => Number(document.getElementById("rp-rate").dataset.rate));
  // Pause answers while the page plays at speed, and stops it there: a
  // page that answered only once the replay ended would take the click
  // as Play and start again. The time is the driver's round trips too.
  const pauseStart = Date.now();
  await page.click("#rp-play");
  const pausedAt = await page.evaluate(() => Number(document.getElementById("rp-pos").dataset.cursor));
  const pauseMs = Date.now() - pauseStart;
  await page.waitForTimeout(500);
  const stillAt = await page.evaluate(() => Number(document.getElementById("rp-pos").dataset.cursor));
  console.log(`   ${rate} segments drawn in the last second; paused at record ${pausedAt} in ${pauseMs} ms`);
  if (rate < minRate) fail(`${rate} segments drawn a second, want ${minRate}`);
  if (pauseMs > 15000 || !(pausedAt < 100002) || stillAt !== pausedAt) fail(`Pause while playing: answered in ${pauseMs} ms, at record ${pausedAt}, then at ${stillAt}`);
  step("jump");
  await page.fill("#rp-jump-n", "99000");
  await page.click("#rp-jump");
  const pos = await page.textContent("#rp-pos");
  if (!pos.includes("#99001")) fail("jump to 99000: position " + pos);
  step("screenshot");
  await page.screenshot({ path: join(out, "replay-100000.png"), fullPage: true });

  step("?capture= as iwarp replay serves it");
  const p2 = await browser.newPage({ viewport: { width: 1400, height: 1100 } });
  p2.on("pageerror", (e) => fail("page error: " + e.message));
  await p2.goto(url + "?capture=replay%2Fsiw-terminate.pcap");
  const s2 = await loaded(p2, "?capture=");
  if (!s2.text.includes("siw-terminate.pcap: 12 records")) fail("?capture= status: " + s2.text);
  await p2.click("#rp-play");
  await p2.waitForFunction(() => document.querySelectorAll("#ladder li").length === 12, null, { timeout: T }).catch(() => fail("playing did not reach the 12th record"));
  await p2.screenshot({ path: join(out, "replay-command.png"), fullPage: true });
} finally {
  await browser.close();
}
console.log(failures ? `${failures} checks failed` : "all replay checks passed");
process.exit(failures ? 1 : 0);
