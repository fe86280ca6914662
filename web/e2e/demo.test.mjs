// End-to-end test of "iwarp demo" in Debian's chromium or firefox-esr
// (IWARP_BROWSER; browser.mjs). The demo must be running; its URL is the
// first argument (or IWARP_DEMO_URL). Screenshots go to the folder in
// IWARP_ARTIFACTS (default .artifacts/demo-e2e).
//
//	node demo.test.mjs http://127.0.0.1:8080/
//	IWARP_BROWSER=firefox node demo.test.mjs http://127.0.0.1:8080/
//
// Over a WebRTC data channel to the Go peer: Write, Read, each Send
// variant (its opcode checked as the Go peer decoded it), the burst
// rate, a Terminate, the other controls; then with loss and reordering
// on the Go peer's UDP path: segments placed out of order and every byte
// in place; slow motion, its cells amber while the placements are drawn;
// two DDP streams, one held while the other goes on. Over MPA
// on a WebSocket: chosen, and as the fallback when the page has no
// WebRTC and when the data channel does not come up: the same Write,
// Read, Send and fault checks, FPDUs and Markers on the ladder. Then two
// tabs pair by code and Write to each other, and a third observes one
// with its code. Exit status 0 means every check held.
import { launch } from "./browser.mjs";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const url = process.argv[2] || process.env.IWARP_DEMO_URL;
const out = process.env.IWARP_ARTIFACTS || ".artifacts/demo-e2e";
if (!url) {
  console.error("usage: node demo.test.mjs URL");
  process.exit(2);
}
rmSync(out, { recursive: true, force: true }); // only this run's screenshots
mkdirSync(out, { recursive: true });

const T = 15000;
// Placements a second the page must draw (the issue asks for 1000; the Go
// test lowers it when the Go peer runs under the race detector).
const minRate = Number(process.env.IWARP_E2E_MIN_RATE || 1000);
const only = process.env.IWARP_E2E_ONLY || ""; // a comma-separated list of parts, for debugging
const want = (part) => !only || only.split(",").includes(part);
let failures = 0;
let t0 = Date.now();
function step(name) { console.log(`-- [${((Date.now() - t0) / 1000).toFixed(1)} s]`, name); }
async function expectText(page, selector, text, what, timeout = T) {
  try {
    await page.waitForFunction(([s, w]) => {
      const el = document.querySelector(s);
      return el && el.textContent.includes(w);
    }, [selector, text], { timeout });
  } catch (e) {
    const got = await page.evaluate((s) => document.querySelector(s)?.textContent ?? "(missing)", selector);
    throw new Error(`${what}: ${selector} should contain ${JSON.stringify(text)}, has ${JSON.stringify(got.slice(0, 400))}`);
  }
}
async function cells(page, side, name, from, n) {
  return page.evaluate(([side, name, from, n]) => {
    const r = document.querySelector(`#${side}-regions .region[data-name="${name}"]`);
    if (!r) return null;
    const c = r.querySelectorAll(".cell");
    let s = "";
    for (let i = from; i < from + n; i++) s += c[i].textContent;
    return s;
  }, [side, name, from, n]);
}
async function textview(page, side, name) {
  return page.evaluate(([side, name]) => document.querySelector(`#${side}-regions .region[data-name="${name}"] .textview`)?.textContent ?? "", [side, name]);
}
// The text the page's "Write 1,000 octets" writes (app.js longText).
function longText(n) {
  let s = "";
  for (let i = 0; s.length < n; i++) s += "[" + String(i).padStart(3, "0") + " direct data placement] ";
  return s.slice(0, n);
}
async function connected(page, what) {
  await expectText(page, "#status", "Connected to the Go peer", what);
  await page.waitForSelector('#remote-regions .region[data-name="Go peer memory"]', { timeout: T });
  await page.waitForSelector('#local-regions .region[data-name="Tab memory"]', { timeout: T });
}
async function setNetwork(page, im) {
  if (im.preset) {
    await page.selectOption("#net-preset", im.preset);
    await page.waitForFunction((n) => document.getElementById("net-now").dataset.preset === n, im.preset, { timeout: T });
    return;
  }
  // The sliders, as a person drags them.
  await page.evaluate((im) => {
    for (const k of ["loss", "delay", "jitter", "dup"]) {
      const el = document.getElementById("net-" + k);
      el.value = String(im[k] || 0);
      el.dispatchEvent(new Event("input", { bubbles: true }));
    }
  }, im);
  await expectText(page, "#net-now", `loss ${im.loss || 0} %, delay ${im.delay || 0} ms, jitter up to ${im.jitter || 0} ms, duplicates ${im.dup || 0} %`, "the network's figures");
}
// sendAndCheck sends one Send variant and waits until the Go peer's
// placement of it shows on the ladder: the opcode as the Go peer decoded
// it must be the variant's.
async function sendAndCheck(page, variant, op, inv) {
  // The Send's rows are those drawn after the click: a row drawn before
  // (an RDMA Read Request the Go peer places late, on a busy machine)
  // is not the Send's.
  const before = await page.locator("#ladder li.out").count();
  await page.selectOption("#s-variant", variant);
  if (inv) await page.selectOption("#s-inv", inv);
  await page.fill("#s-data", variant);
  await page.click("#do-send");
  await page.waitForFunction((n) => [...document.querySelectorAll("#ladder li.out")].slice(n).some((r) => r.classList.contains("placed")), before, { timeout: T });
  const got = await page.evaluate((n) => {
    const rows = [...document.querySelectorAll("#ladder li.out")].slice(n);
    return rows.find((r) => r.classList.contains("placed")).dataset.placedOp;
  }, before);
  if (got !== op) throw new Error(`the ${variant} variant: the Go peer placed a ${JSON.stringify(got)}, want ${JSON.stringify(op)}`);
  console.log(`   ${variant}: the Go peer received a ${got}`);
}

// Host candidates as IP addresses, not mDNS names: the test machine has
// no multicast DNS, and both tabs run in this one browser.
const browser = await launch({
  chromiumArgs: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    "--disable-features=WebRtcHideLocalIpsWithMdns"],
  firefoxPrefs: { "media.peerconnection.ice.obfuscate_host_addresses": false },
});
t0 = Date.now();
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 900 } });
  const page = await ctx.newPage();
  page.on("console", (m) => { if (m.type() === "error" || process.env.IWARP_E2E_VERBOSE) console.log("page console:", m.text()); });
  page.on("pageerror", (e) => console.log("page error:", e.message));

  step("load the page; interactive within 2 s");
  const loadStart = Date.now();
  await page.goto(url);
  await page.waitForFunction(() => !document.getElementById("connect-go").disabled, null, { timeout: T });
  const loadMs = Date.now() - loadStart;
  console.log(`   interactive after ${loadMs} ms`);
  if (loadMs > 2000) throw new Error(`the page took ${loadMs} ms to become interactive (limit 2000)`);
  await page.screenshot({ path: join(out, "01-loaded.png"), fullPage: true });

  if (want("dc")) {
    step("connect to the Go peer over a data channel (keyboard)");
    await page.selectOption("#mulpdu", "48");
    await page.selectOption("#transport", "dc");
    await page.focus("#connect-go");
    await page.keyboard.press("Enter");
    await connected(page, "status");
    await expectText(page, "#status", "data channel", "status names the transport");

    step("RDMA Write at offset 5 of the Go peer's memory");
    await page.fill("#w-data", "Hello, iWARP! Direct data placement, segment by segment.");
    await page.fill("#w-off", "5");
    await page.click("#do-write");
    await expectText(page, "#local-cq", "RDMA_WRITE", "write completion");
    await page.waitForFunction(() => document.querySelector('#remote-regions .region[data-name="Go peer memory"] .textview')
      ?.textContent.includes("Hello, iWARP! Direct data placement, segment by segment."), null, { timeout: T });
    const got = await cells(page, "remote", "Go peer memory", 5, 13);
    if (got !== "Hello,␣iWARP!") throw new Error(`cells 5-17 of the Go peer's grid: ${JSON.stringify(got)}`);
    const before = await cells(page, "remote", "Go peer memory", 0, 5);
    if (before !== "·····") throw new Error(`cells 0-4 should be untouched, are ${JSON.stringify(before)}`);
    const segs = await page.locator("#ladder li.out").count();
    if (segs < 2) throw new Error(`a 56-octet Write with MULPDU 48 should take several segments, the ladder shows ${segs}`);
    // Placed, then delivered: the Write's cells end green.
    await page.waitForFunction(() => document.querySelectorAll('#remote-regions .region[data-name="Go peer memory"] .cell.delivered').length >= 56, null, { timeout: T });
    await page.screenshot({ path: join(out, "02-write.png"), fullPage: true });

    step("select a segment: its header fields are shown");
    await page.locator("#ladder li.out button").first().click();
    await expectText(page, "#detail", "Tagged Offset (TO)", "segment detail");
    await expectText(page, "#detail", "DDP-SSN", "segment detail");

    step("RDMA Read 8 octets from offset 5 into the read sink");
    await page.fill("#r-len", "8");
    await page.fill("#r-off", "5");
    await page.click("#do-read");
    await expectText(page, "#local-cq", "RDMA_READ", "read completion");
    await page.waitForFunction(() => document.querySelector('#local-regions .region[data-name="Read sink"] .textview')?.textContent.includes("Hello, i"), null, { timeout: T });
    const sink = await cells(page, "local", "Read sink", 0, 8);
    if (sink !== "Hello,␣i") throw new Error(`read sink cells: ${JSON.stringify(sink)}`);

    step("each Send variant sends its own opcode, as the Go peer decodes it");
    await sendAndCheck(page, "send", "Send");
    await expectText(page, "#remote-cq", "RECV", "the Go peer's receive completion");
    await page.waitForFunction(() => [...document.querySelectorAll("#remote-regions .region.recv.filled .textview")].some((e) => e.textContent.includes("send")), null, { timeout: T });
    await sendAndCheck(page, "send-se", "Send with Solicited Event");
    // Two more receive buffers and two regions to invalidate.
    const nRemote = await page.locator("#remote-regions .region").count();
    await page.click("#go-recv");
    await page.click("#go-recv");
    await page.click("#go-register");
    await page.waitForFunction((n) => document.querySelectorAll("#remote-regions .region").length === n + 3, nRemote, { timeout: T });
    await page.click("#go-register");
    await page.waitForFunction((n) => document.querySelectorAll("#remote-regions .region").length === n + 4, nRemote, { timeout: T });
    const goRegions = await page.evaluate(() => [...document.querySelectorAll('#remote-regions .region[data-name="Go peer region"]')].map((r) => r.dataset.stag));
    await sendAndCheck(page, "send-inv", "Send with Invalidate", goRegions[0]);
    await page.waitForSelector(`#remote-regions .region.invalid[data-stag="${goRegions[0]}"]`, { timeout: T });
    await sendAndCheck(page, "send-se-inv", "Send with Solicited Event and Invalidate", goRegions[1]);
    await page.waitForSelector(`#remote-regions .region.invalid[data-stag="${goRegions[1]}"]`, { timeout: T });
    await page.screenshot({ path: join(out, "03-read-send.png"), fullPage: true });

    step("a memory window over 16 octets of the Go peer's memory from offset 16");
    const memStag = await page.evaluate(() => document.querySelector('#remote-regions .region[data-name="Go peer memory"]').dataset.stag);
    await page.selectOption("#go-stag", memStag);
    await page.fill("#go-w-off", "16");
    await page.fill("#go-w-len", "16");
    await page.selectOption("#go-w-access", "w");
    await page.click("#go-bind");
    const winSel = '#remote-regions .region[data-name="Go peer memory"] .windows li.window';
    await page.waitForSelector(winSel, { timeout: T });
    await expectText(page, winSel, "TO 0x1010 · 16 octets (offset 16 of this region) · rights: remote write · valid", "the window's listing");
    const outlined = await page.evaluate(() => [...document.querySelectorAll('#remote-regions .region[data-name="Go peer memory"] .cell')]
      .map((c, i) => (c.classList.contains("win") ? i : -1)).filter((i) => i >= 0));
    if (outlined.length !== 16 || outlined[0] !== 16 || outlined[15] !== 31) throw new Error(`the window's outlined cells: ${JSON.stringify(outlined)}`);
    const winOption = await page.evaluate(() => [...document.getElementById("w-stag").options].some((o) => o.textContent.includes("window on Go peer memory")));
    if (!winOption) throw new Error("the RDMA Write control does not offer the window's STag");

    step("Atomic Operations on the Go peer's counter, beside the Go peer's own increments");
    // The counter is the Atomic control's default target.
    await page.waitForSelector('#remote-regions .region[data-name="Go peer counter"]', { timeout: T });
    const target = await page.evaluate(() => { const s = document.getElementById("a-stag"); return s.options[s.selectedIndex]?.textContent || ""; });
    if (!target.includes("Go peer counter")) throw new Error(`the Atomic control targets ${JSON.stringify(target)}, not the Go peer's counter`);
    await page.selectOption("#a-op", "fetchadd");
    await page.fill("#a-data", "1");
    // Five FetchAdds of 1; after the first and the third the Go peer adds
    // 1 itself. Each returns the word before it.
    const wantOrig = [0, 2, 3, 5, 6];
    for (let i = 0; i < 5; i++) {
      await page.click("#do-atomic");
      await expectText(page, "#log", `completed: the word held ${wantOrig[i]} before it`, `FetchAdd ${i + 1}`);
      if (i === 0 || i === 2) {
        await page.click("#go-inc");
        await expectText(page, "#log", `counter ${wantOrig[i] + 1} -> ${wantOrig[i] + 2}`, "the Go peer's own increment");
      }
    }
    await page.waitForFunction(() => (document.querySelector('#remote-regions .region[data-name="Go peer counter"] .textview')?.textContent || "").endsWith(": 7"), null, { timeout: T });
    await expectText(page, "#a-value", "Go peer's counter: 7", "the counter readout");
    await expectText(page, "#log", "the Go peer's RDMAP carried out FetchAdd", "the Go peer's report of an executed atomic");
    // A CmpSwap whose compare fails leaves the word; one that matches swaps.
    await page.selectOption("#a-op", "cmpswap");
    await page.fill("#a-data", "100");
    await page.fill("#a-cmp", "3");
    await page.click("#do-atomic");
    await expectText(page, "#log", "completed: the word held 7 before it", "CmpSwap that does not match");
    await page.fill("#a-cmp", "7");
    await page.click("#do-atomic");
    await page.waitForFunction(() => (document.querySelector('#remote-regions .region[data-name="Go peer counter"] .textview')?.textContent || "").endsWith(": 100"), null, { timeout: T });
    // The ladder: Atomic Requests out, as the Go peer decoded them, and
    // Atomic Responses back.
    const atomicRows = await page.evaluate(() => ({
      req: document.querySelectorAll('#ladder li.out.placed[data-placed-op="Atomic Request"]').length,
      resp: document.querySelectorAll('#ladder li.in[data-op="Atomic Response"]').length,
    }));
    if (atomicRows.req < 7 || atomicRows.resp < 7) throw new Error(`the ladder shows ${atomicRows.req} Atomic Requests placed at the Go peer and ${atomicRows.resp} Atomic Responses, want 7 each`);
    console.log(`   counter 7 after 5 FetchAdds and 2 Go-side increments, then 100 by CmpSwap; ladder: ${atomicRows.req} segments of Atomic Requests placed at the Go peer (52 octets and their header in 48-octet segments), ${atomicRows.resp} Atomic Responses`);
    // The walk-through's step does the same.
    await page.click('#tour-steps button[data-do="atomic"]');
    await page.waitForSelector('#tour-steps li[data-step="atomic"].done', { timeout: T });
    // Its increment goes by the signalling channel, its FetchAdd by the
    // data channel: either may come first; both count.
    await page.waitForFunction(() => /the word held 10[01] before it/.test(document.getElementById("log").textContent), null, { timeout: T });
    await page.waitForFunction(() => (document.querySelector('#remote-regions .region[data-name="Go peer counter"] .textview')?.textContent || "").endsWith(": 102"), null, { timeout: T });
    await page.screenshot({ path: join(out, "03b-atomic.png"), fullPage: true });

    step(`burst: 2000 Writes, placements drawn at ${minRate} a second or more`);
    // The machine may be shared and busy: the best of up to six bursts
    // counts.
    let best = 0;
    for (let attempt = 1; attempt <= 6 && best < minRate; attempt++) {
      await page.fill("#b-count", "2000");
      const base = await page.evaluate(() => Number(document.getElementById("rate").dataset.remoteTotal || 0));
      const burstStart = Date.now();
      await page.click("#do-burst");
      await page.waitForFunction((b) => Number(document.getElementById("rate").dataset.remoteTotal) >= b + 2000, base, { timeout: 30000 });
      const burstMs = Date.now() - burstStart;
      const rate = Math.round(2000 / (burstMs / 1000));
      console.log(`   burst ${attempt}: 2000 placements drawn in ${burstMs} ms: ${rate} a second`);
      best = Math.max(best, rate);
    }
    if (best < minRate) throw new Error(`placements drawn at ${best} a second, below ${minRate}`);
    await page.screenshot({ path: join(out, "04-burst.png"), fullPage: true });

    step("narrow window");
    await page.setViewportSize({ width: 420, height: 800 });
    await page.screenshot({ path: join(out, "05-narrow.png"), fullPage: false });
    await page.setViewportSize({ width: 1280, height: 900 });

    step("fault: Write to a bad STag gives a Terminate");
    await page.click("#fault-stag");
    await page.waitForSelector("#terminate:not([hidden])", { timeout: T });
    await expectText(page, "#terminate", "Invalid Steering Tag", "terminate panel");
    await expectText(page, "#terminate", "Layer", "terminate panel");
    await expectText(page, "#status", "Terminated", "status");
    await page.screenshot({ path: join(out, "06-terminate.png"), fullPage: true });

    step("connect again after the Terminate; the other controls");
    await page.click("#connect-go");
    await connected(page, "status after reconnecting");
    await page.selectOption("#w-mode", "hex");
    await page.fill("#w-data", "de ad be ef");
    await page.fill("#w-off", "0");
    await page.click("#do-write");
    await page.waitForFunction(() => {
      const c = document.querySelectorAll('#remote-regions .region[data-name="Go peer memory"] .cell');
      return c.length && c[0].textContent === "de" && c[3].textContent === "ef";
    }, null, { timeout: T });
    await page.selectOption("#w-mode", "text");
    const nLocal = await page.locator("#local-regions .region").count();
    await page.fill("#m-len", "32");
    await page.click("#do-register");
    await page.waitForFunction((n) => document.querySelectorAll("#local-regions .region").length === n + 1, nLocal, { timeout: T });
    const tabRegion = await page.evaluate(() => document.querySelector('#local-regions .region[data-name="Tab region"]').dataset.stag);
    await page.selectOption("#m-stag", tabRegion);
    await page.click("#do-advertise");
    await page.waitForFunction(() => [...document.querySelectorAll("#remote-regions .region.recv.filled .textview")]
      .some((e) => e.textContent.includes("As an advertisement (rdmap.RemoteBuffer, 16 octets): STag 0x")), null, { timeout: T });
    await page.click("#do-invalidate");
    await page.waitForSelector(`#local-regions .region.invalid[data-stag="${tabRegion}"]`, { timeout: T });
    await expectText(page, `#local-regions .region[data-stag="${tabRegion}"] .meta`, "INVALID", "invalid region text");
    await page.click("#do-deregister");
    await page.waitForFunction((s) => !document.querySelector(`#local-regions .region[data-stag="${s}"]`), tabRegion, { timeout: T });
    await page.screenshot({ path: join(out, "07-controls.png"), fullPage: true });
  }

  if (want("impaired")) {
    step("loss, delay, jitter and duplicates on the Go peer's UDP path: out of order, every byte in place");
    await page.selectOption("#transport", "dc");
    await page.selectOption("#mulpdu", "48");
    await setNetwork(page, { loss: 5, delay: 5, jitter: 40, dup: 2 });
    await page.click("#connect-go");
    await connected(page, "status on the impaired network");
    await expectText(page, "#net-now", "loss 5 %", "the figures shown");
    const text = longText(1000);
    let overtook = 0;
    for (let i = 1; i <= 8 && overtook === 0; i++) {
      const delivered = await page.evaluate(() => document.querySelectorAll('#remote-regions .region[data-name="Go peer memory"] .cell.delivered').length);
      await page.click("#do-long");
      await expectText(page, '#remote-regions .region[data-name="Go peer memory"] .textview', text.slice(900, 960), "the long Write", 30000);
      overtook = await page.evaluate(() => Number(document.getElementById("ladder-stats").dataset.overtook || 0));
      console.log(`   Write ${i} of 1000 octets: ${overtook} segments placed before an earlier one so far (${delivered} cells delivered before)`);
    }
    if (overtook === 0) throw new Error("no segment was placed out of order under loss and reordering");
    // Every byte lands where it belongs: the page's memory equals the
    // text, once the retransmissions are in.
    const wantCells = [...text].map((c) => (c === " " ? "␣" : c)).join("");
    const memory = () => page.evaluate(() => {
      const r = document.querySelector('#remote-regions .region[data-name="Go peer memory"]');
      return [...r.querySelectorAll(".cell")].slice(0, 1000).map((c) => c.textContent).join("");
    });
    try {
      await page.waitForFunction((w) => {
        const r = document.querySelector('#remote-regions .region[data-name="Go peer memory"]');
        return [...r.querySelectorAll(".cell")].slice(0, 1000).map((c) => c.textContent).join("") === w;
      }, wantCells, { timeout: 30000 });
    } catch (e) {
      throw new Error(`the Go peer's memory after the Writes: ${JSON.stringify((await memory()).slice(0, 200))}…`);
    }
    await page.waitForFunction(() => document.querySelectorAll('#remote-regions .region[data-name="Go peer memory"] .cell.delivered').length >= 1000, null, { timeout: 30000 });
    const row = await page.locator("#ladder li.overtook").count();
    console.log(`   ${row} ladder rows marked as having overtaken; network: ${await page.textContent("#net-stats")}`);
    // A Send into a receive buffer, delivered whole.
    await page.selectOption("#s-variant", "send");
    await page.fill("#s-data", "untagged: placed in any order, delivered once whole");
    await page.click("#do-send");
    await page.waitForFunction(() => [...document.querySelectorAll("#remote-regions .region.recv.filled .textview")]
      .some((e) => e.textContent.includes("delivered once whole")), null, { timeout: 30000 });
    await page.screenshot({ path: join(out, "08-impaired.png"), fullPage: true });
    await setNetwork(page, { preset: "clean" });
  }

  if (want("slowmo")) {
    step("slow motion: a Write's placements drawn one by one, its cells amber until the delivery is drawn");
    await page.selectOption("#transport", "dc");
    await page.selectOption("#mulpdu", "48");
    await page.check("#slowmo");
    await page.click("#connect-go");
    await connected(page, "status with slow motion");
    await page.click("#do-long");
    await page.waitForTimeout(1000);
    const amber = () => page.evaluate(() => ({
      pending: document.querySelectorAll('#remote-regions .region[data-name="Go peer memory"] .cell.pending').length,
      left: Number(document.getElementById("slowmo-left").dataset.left || 0),
    }));
    const a = await amber();
    console.log(`   after 1 s: ${a.pending} cells amber, ${a.left} events still to draw`);
    if (!(a.pending > 0 && a.pending < 1000 && a.left > 0)) throw new Error(`slow motion: after 1 s ${a.pending} cells amber and ${a.left} events waiting`);
    await page.screenshot({ path: join(out, "09-slow-motion.png"), fullPage: true });
    await page.waitForFunction(() => document.querySelectorAll('#remote-regions .region[data-name="Go peer memory"] .cell.delivered').length >= 1000, null, { timeout: 30000 });
    if ((await amber()).pending !== 0) throw new Error("slow motion: cells still amber after the Write was drawn delivered");
    await page.uncheck("#slowmo");
  }

  if (want("streams")) {
    step("two DDP streams on one association: stream 3 goes on while stream 1 is held");
    await page.check("#two-streams");
    await page.selectOption("#transport", "dc");
    await page.click("#connect-go");
    await connected(page, "status with two streams");
    await expectText(page, "#status", "2 DDP streams", "status names both streams");
    await page.waitForSelector('#remote-regions .region[data-name="Go peer memory, stream 3"]', { timeout: T });
    await page.click("#st-run");
    const delivered = (q) => page.evaluate((id) => Number(document.getElementById(id).dataset.delivered || 0), q);
    await page.waitForFunction(() => Number(document.getElementById("st-1").dataset.delivered || 0) > 5 && Number(document.getElementById("st-3").dataset.delivered || 0) > 5, null, { timeout: T });
    await page.click("#st-hold");
    await page.waitForTimeout(600); // what was in flight arrives
    const [a1, a3] = [await delivered("st-1"), await delivered("st-3")];
    await page.waitForTimeout(1800);
    const [b1, b3] = [await delivered("st-1"), await delivered("st-3")];
    console.log(`   during the hold: stream 1 delivered ${b1 - a1}, stream 3 ${b3 - a3}`);
    await page.screenshot({ path: join(out, "09-two-streams.png"), fullPage: true });
    if (b1 !== a1) throw new Error(`stream 1 delivered ${b1 - a1} messages while held`);
    if (b3 - a3 < 10) throw new Error(`stream 3 delivered only ${b3 - a3} messages while stream 1 was held`);
    await page.waitForFunction((n) => Number(document.getElementById("st-1").dataset.delivered || 0) > n + 10, b1, { timeout: T });
    await page.click("#st-run"); // stop
    await page.uncheck("#two-streams");
  }

  if (want("mpa")) {
    step("MPA over a WebSocket, chosen: FPDUs with CRC and Markers; Write, Read, Send, fault");
    await page.selectOption("#transport", "mpa");
    await page.check("#markers");
    await page.click("#connect-go");
    await connected(page, "status over MPA");
    await expectText(page, "#status", "WebSocket", "status names the transport");
    await expectText(page, "#status", "Markers", "status names the Markers");
    await setNetwork(page, { preset: "reordering path" });
    await expectText(page, "#net-now", "only delay and jitter apply", "the figures shown for TCP");
    await page.fill("#w-data", "over MPA");
    await page.fill("#w-off", "5");
    await page.click("#do-write");
    await expectText(page, "#local-cq", "RDMA_WRITE", "write completion over MPA");
    await expectText(page, '#remote-regions .region[data-name="Go peer memory"] .textview', "over MPA", "the Write over MPA");
    await page.click("#do-long");
    const text = longText(1000);
    await expectText(page, '#remote-regions .region[data-name="Go peer memory"] .textview', text.slice(900, 960), "the long Write over MPA");
    await expectText(page, "#ladder", "FPDU #", "FPDU rows");
    await expectText(page, "#ladder", "Marker", "a Marker on the ladder");
    await page.fill("#r-len", "8");
    await page.fill("#r-off", "0");
    await page.click("#do-read");
    await expectText(page, "#local-cq", "RDMA_READ", "read completion over MPA");
    await expectText(page, '#local-regions .region[data-name="Read sink"] .textview', text.slice(0, 8), "the Read over MPA");
    await page.selectOption("#s-variant", "send");
    await page.fill("#s-data", "ping over MPA");
    await page.click("#do-send");
    await page.waitForFunction(() => [...document.querySelectorAll("#remote-regions .region.recv.filled .textview")].some((e) => e.textContent.includes("ping over MPA")), null, { timeout: T });
    const overtook = await page.evaluate(() => Number(document.getElementById("ladder-stats").dataset.overtook || 0));
    if (overtook !== 0) throw new Error(`${overtook} segments out of order on a byte stream`);
    await page.screenshot({ path: join(out, "10-mpa.png"), fullPage: true });
    await page.click("#fault-bounds");
    await page.waitForSelector("#terminate:not([hidden])", { timeout: T });
    await expectText(page, "#terminate", "bounds", "terminate panel over MPA");
    await setNetwork(page, { preset: "clean" });
    await page.uncheck("#markers");

    step("fallback to MPA when the page has no WebRTC");
    const np = await ctx.newPage();
    await np.addInitScript(() => { delete window.RTCPeerConnection; });
    await np.goto(url);
    await np.waitForFunction(() => !document.getElementById("connect-go").disabled, null, { timeout: T });
    await np.selectOption("#transport", "auto");
    await np.click("#connect-go");
    await connected(np, "status after the fallback");
    await expectText(np, "#status", "WebSocket", "status names the fallback transport");
    await expectText(np, "#log", "Falling back to MPA", "the log says why");
    await np.fill("#w-data", "fallback");
    await np.click("#do-write");
    await expectText(np, '#remote-regions .region[data-name="Go peer memory"] .textview', "fallback", "a Write over the fallback");
    await np.screenshot({ path: join(out, "11-fallback.png"), fullPage: true });
    await np.close();

    step("fallback to MPA when the data channel does not come up within 5 s");
    const sp = await ctx.newPage();
    await sp.addInitScript(() => {
      // The answer never takes effect: ICE never starts.
      RTCPeerConnection.prototype.setRemoteDescription = () => new Promise(() => {});
    });
    await sp.goto(url);
    await sp.waitForFunction(() => !document.getElementById("connect-go").disabled, null, { timeout: T });
    await sp.click("#connect-go");
    await connected(sp, "status after the timeout");
    await expectText(sp, "#status", "WebSocket", "status names the fallback transport");
    await expectText(sp, "#log", "not up within", "the log says why");
    await sp.close();
  }

  if (want("tabs")) {
    step("pair two tabs by code and Write between them");
    const a = page;
    await a.click("#disconnect");
    const b = await ctx.newPage();
    b.on("pageerror", (e) => console.log("page b error:", e.message));
    await b.goto(url);
    await b.waitForFunction(() => !document.getElementById("connect-go").disabled, null, { timeout: T });
    await a.uncheck("#unordered"); // this stream: ordered delivery
    await a.click("#invite");
    await a.waitForFunction(() => document.getElementById("my-code").dataset.code, null, { timeout: T });
    const code = await a.evaluate(() => document.getElementById("my-code").dataset.code);
    const aid = await a.evaluate(() => document.body.dataset.tab);
    // A wrong code pairs nobody.
    await b.fill("#code", "000000");
    await b.click("#join");
    await expectText(b, "#log", "no tab offers pair", "a wrong code refused");
    await b.fill("#code", code);
    await b.click("#join");
    await expectText(a, "#status", "Connected to tab", "tab A status");
    await expectText(b, "#status", "Connected to tab " + aid, "tab B status");
    await b.waitForSelector('#remote-regions .region[data-name="Tab memory"]', { timeout: T });
    await b.fill("#w-data", "tab to tab");
    await b.fill("#w-off", "0");
    await b.click("#do-write");
    await expectText(b, "#local-cq", "RDMA_WRITE", "tab B write completion");
    await expectText(a, '#local-regions .region[data-name="Tab memory"] .textview', "tab to tab", "tab A's memory");
    const acells = await cells(a, "local", "Tab memory", 0, 10);
    if (acells !== "tab␣to␣tab") throw new Error(`tab A's grid: ${JSON.stringify(acells)}`);
    await a.screenshot({ path: join(out, "12-tab-a.png"), fullPage: true });
    await b.screenshot({ path: join(out, "13-tab-b.png"), fullPage: true });

    step("a third tab observes tab A with A's consent (its code) and sees its next Write");
    const c = await ctx.newPage();
    c.on("pageerror", (e) => console.log("page c error:", e.message));
    await c.goto(url);
    await c.waitForFunction(() => !document.getElementById("connect-go").disabled, null, { timeout: T });
    await c.fill("#code", code); // the pairing code, used up, lets nobody observe
    await c.click("#observe");
    await expectText(c, "#log", "no tab offers observe", "observing without consent refused");
    await a.click("#share");
    await a.waitForFunction(() => document.getElementById("share-code").dataset.code, null, { timeout: T });
    const ocode = await a.evaluate(() => document.getElementById("share-code").dataset.code);
    await c.fill("#code", ocode);
    await c.click("#observe");
    await expectText(c, "#status", "Observing tab " + aid, "observer status");
    await c.waitForSelector('#local-regions .region[data-name="Tab memory"]', { timeout: T });
    if (!(await c.locator("#do-write").isDisabled())) throw new Error("the observer's controls should be disabled");
    await b.fill("#w-data", "observed!");
    await b.fill("#w-off", "20");
    await b.click("#do-write");
    await expectText(c, '#local-regions .region[data-name="Tab memory"] .textview', "observed!", "the observer's view");
    await c.screenshot({ path: join(out, "14-observer.png"), fullPage: true });
  }
} catch (e) {
  failures++;
  console.error("FAIL:", e.message);
  for (const [i, p] of browser.contexts().flatMap((c) => c.pages()).entries()) {
    await p.screenshot({ path: join(out, `fail-${i}.png`), fullPage: true }).catch(() => {});
  }
} finally {
  await browser.close();
}
console.log(failures ? "FAIL" : "PASS", `(${((Date.now() - t0) / 1000).toFixed(1)} s; screenshots in ${out})`);
process.exit(failures ? 1 : 0);
