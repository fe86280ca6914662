// End-to-end test of "iwarp demo" in Debian's chromium, driven by
// playwright-core. The demo must be running; its URL is the first
// argument (or IWARP_DEMO_URL). Screenshots go to the folder in
// IWARP_ARTIFACTS (default .artifacts/demo-e2e).
//
//	node demo.test.mjs http://127.0.0.1:8080/
//
// It connects a tab to the Go peer, does an RDMA Write, an RDMA Read and
// a Send and checks the grids and completion queues, provokes a bad-STag
// Write and checks the Terminate, then pairs two tabs browser to browser
// (ordered delivery this time) and checks a Write between them, and a
// third tab observes one of them. Exit status 0 means every check held.
import { chromium } from "playwright-core";
import { mkdirSync, rmSync } from "node:fs";
import { join } from "node:path";

const url = process.argv[2] || process.env.IWARP_DEMO_URL;
const out = process.env.IWARP_ARTIFACTS || ".artifacts/demo-e2e";
const exe = process.env.CHROMIUM || "/usr/bin/chromium";
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
let failures = 0;
function step(name) { console.log("--", name); }
async function expectText(page, selector, want, what) {
  try {
    await page.waitForFunction(([s, w]) => {
      const el = document.querySelector(s);
      return el && el.textContent.includes(w);
    }, [selector, want], { timeout: T });
  } catch (e) {
    const got = await page.evaluate((s) => document.querySelector(s)?.textContent ?? "(missing)", selector);
    throw new Error(`${what}: ${selector} should contain ${JSON.stringify(want)}, has ${JSON.stringify(got.slice(0, 300))}`);
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

const browser = await chromium.launch({
  executablePath: exe,
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
    // Host candidates as IP addresses, not mDNS names: the test machine
    // has no multicast DNS, and both tabs run in this one browser.
    "--disable-features=WebRtcHideLocalIpsWithMdns"],
});
const t0 = Date.now();
try {
  const ctx = await browser.newContext({ viewport: { width: 1280, height: 800 } });
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

  step("connect to the Go peer (keyboard)");
  await page.selectOption("#mulpdu", "48");
  await page.focus("#connect-go");
  await page.keyboard.press("Enter");
  await expectText(page, "#status", "Connected to the Go peer", "status");
  await page.waitForSelector('#remote-regions .region[data-name="Go peer memory"]', { timeout: T });
  await page.waitForSelector('#local-regions .region[data-name="Tab memory"]', { timeout: T });

  step("RDMA Write 'Hello, iWARP!' at offset 5 of the Go peer's memory");
  await page.fill("#w-data", "Hello, iWARP! Direct data placement, segment by segment.");
  await page.fill("#w-off", "5");
  await page.click("#do-write");
  await expectText(page, "#local-cq", "RDMA_WRITE", "write completion");
  await page.waitForFunction(() => {
    const r = document.querySelector('#remote-regions .region[data-name="Go peer memory"] .textview');
    return r && r.textContent.includes("Hello, iWARP! Direct data placement, segment by segment.");
  }, null, { timeout: T });
  const got = await cells(page, "remote", "Go peer memory", 5, 13);
  if (got !== "Hello,␣iWARP!") throw new Error(`cells 5-17 of the Go peer's grid: ${JSON.stringify(got)}`);
  const before = await cells(page, "remote", "Go peer memory", 0, 5);
  if (before !== "·····") throw new Error(`cells 0-4 should be untouched, are ${JSON.stringify(before)}`);
  const segs = await page.locator("#ladder li.out").count();
  if (segs < 2) throw new Error(`a 57-octet Write with MULPDU 48 should take several segments, the ladder shows ${segs}`);
  await page.screenshot({ path: join(out, "02-write.png"), fullPage: true });

  step("select a segment: its header fields are shown");
  await page.locator("#ladder li.out button").first().click();
  await expectText(page, "#detail", "Tagged Offset (TO)", "segment detail");

  step("RDMA Read 8 octets from offset 5 into the read sink");
  await page.fill("#r-len", "8");
  await page.fill("#r-off", "5");
  await page.click("#do-read");
  await expectText(page, "#local-cq", "RDMA_READ", "read completion");
  await page.waitForFunction(() => {
    const r = document.querySelector('#local-regions .region[data-name="Read sink"] .textview');
    return r && r.textContent.includes("Hello, i");
  }, null, { timeout: T });
  const sink = await cells(page, "local", "Read sink", 0, 8);
  if (sink !== "Hello,␣i") throw new Error(`read sink cells: ${JSON.stringify(sink)}`);

  step("Send 'ping': it lands in the Go peer's first receive buffer");
  await page.fill("#s-data", "ping");
  await page.click("#do-send");
  await expectText(page, "#local-cq", "SEND", "send completion");
  await expectText(page, "#remote-cq", "RECV", "the Go peer's receive completion");
  await page.waitForFunction(() => {
    const r = document.querySelector("#remote-regions .region.recv.filled .textview");
    return r && r.textContent.includes("ping");
  }, null, { timeout: T });
  await page.screenshot({ path: join(out, "03-read-send.png"), fullPage: true });

  step(`burst: 2000 Writes, placements drawn at ${minRate} a second or more`);
  // The machine may be shared and busy: the best of three bursts counts.
  let best = 0;
  for (let attempt = 1; attempt <= 3 && best < minRate; attempt++) {
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
  await page.setViewportSize({ width: 1280, height: 800 });

  step("fault: Write to a bad STag gives a Terminate");
  await page.click("#fault-stag");
  await page.waitForSelector("#terminate:not([hidden])", { timeout: T });
  await expectText(page, "#terminate", "Invalid Steering Tag", "terminate panel");
  await expectText(page, "#terminate", "Layer", "terminate panel");
  await expectText(page, "#status", "Terminated", "status");
  await page.screenshot({ path: join(out, "06-terminate.png"), fullPage: true });

  step("connect again after the Terminate; the other controls");
  await page.click("#connect-go");
  await expectText(page, "#status", "Connected to the Go peer", "status after reconnecting");
  await page.waitForSelector('#remote-regions .region[data-name="Go peer memory"]', { timeout: T });
  // Hex bytes.
  await page.selectOption("#w-mode", "hex");
  await page.fill("#w-data", "de ad be ef");
  await page.fill("#w-off", "0");
  await page.click("#do-write");
  await page.waitForFunction(() => {
    const c = document.querySelectorAll('#remote-regions .region[data-name="Go peer memory"] .cell');
    return c.length && c[0].textContent === "de" && c[3].textContent === "ef";
  }, null, { timeout: T });
  await page.selectOption("#w-mode", "text");
  // The Go peer's memory: a new region and a receive buffer.
  const nRemote = await page.locator("#remote-regions .region").count();
  await page.click("#go-register");
  await page.click("#go-recv");
  await page.waitForFunction((n) => document.querySelectorAll("#remote-regions .region").length === n + 2, nRemote, { timeout: T });
  // This tab's memory: register, advertise, invalidate, deregister.
  const nLocal = await page.locator("#local-regions .region").count();
  await page.fill("#m-len", "32");
  await page.click("#do-register");
  await page.waitForFunction((n) => document.querySelectorAll("#local-regions .region").length === n + 1, nLocal, { timeout: T });
  const tabRegion = await page.evaluate(() => document.querySelector('#local-regions .region[data-name="Tab region"]').dataset.stag);
  await page.selectOption("#m-stag", tabRegion);
  await page.click("#do-advertise");
  await page.waitForFunction(() => [...document.querySelectorAll("#remote-regions .region.recv.filled .textview")]
    .some((e) => e.textContent.includes("STag 0x")), null, { timeout: T });
  await page.click("#do-invalidate");
  await page.waitForSelector(`#local-regions .region.invalid[data-stag="${tabRegion}"]`, { timeout: T });
  await expectText(page, `#local-regions .region[data-stag="${tabRegion}"] .meta`, "INVALID", "invalid region text");
  await page.click("#do-deregister");
  await page.waitForFunction((s) => !document.querySelector(`#local-regions .region[data-stag="${s}"]`), tabRegion, { timeout: T });
  // Send with Invalidate of the Go peer's second region.
  const goRegion = await page.evaluate(() => document.querySelector('#remote-regions .region[data-name="Go peer region"]').dataset.stag);
  await page.selectOption("#s-variant", "inv");
  await page.selectOption("#s-inv", goRegion);
  await page.click("#do-send");
  await page.waitForSelector(`#remote-regions .region.invalid[data-stag="${goRegion}"]`, { timeout: T });
  await page.screenshot({ path: join(out, "07-controls.png"), fullPage: true });

  step("pair two tabs browser to browser and Write between them");
  const a = page;
  await a.click("#disconnect");
  const b = await ctx.newPage();
  b.on("pageerror", (e) => console.log("page b error:", e.message));
  await b.goto(url);
  await b.waitForFunction(() => !document.getElementById("connect-go").disabled, null, { timeout: T });
  const bid = await b.evaluate(() => document.title.replace(/\D+/g, ""));
  await a.waitForFunction((id) => [...document.querySelectorAll("#tabs option")].some((o) => o.value === id), bid, { timeout: T });
  await a.selectOption("#tabs", bid);
  await a.uncheck("#unordered"); // this stream: ordered delivery
  await a.click("#connect-tab");
  await expectText(a, "#status", "Connected to tab " + bid, "tab A status");
  await expectText(a, "#status", "sends ordered)", "tab A status");
  await expectText(b, "#status", "Connected to tab", "tab B status");
  await a.waitForSelector('#remote-regions .region[data-name="Tab memory"]', { timeout: T });
  await a.fill("#w-data", "tab to tab");
  await a.fill("#w-off", "0");
  await a.click("#do-write");
  await expectText(a, "#local-cq", "RDMA_WRITE", "tab A write completion");
  await b.waitForFunction(() => {
    const r = document.querySelector('#local-regions .region[data-name="Tab memory"] .textview');
    return r && r.textContent.includes("tab to tab");
  }, null, { timeout: T });
  const bcells = await cells(b, "local", "Tab memory", 0, 10);
  if (bcells !== "tab␣to␣tab") throw new Error(`tab B's grid: ${JSON.stringify(bcells)}`);
  await a.screenshot({ path: join(out, "08-tab-a.png"), fullPage: true });
  await b.screenshot({ path: join(out, "09-tab-b.png"), fullPage: true });

  step("a third tab observes tab A (read-only) and sees its next Write");
  const c = await ctx.newPage();
  c.on("pageerror", (e) => console.log("page c error:", e.message));
  await c.goto(url);
  const aid = await a.evaluate(() => document.title.replace(/\D+/g, ""));
  await c.waitForFunction((id) => [...document.querySelectorAll("#tabs option")].some((o) => o.value === id), aid, { timeout: T });
  await c.selectOption("#tabs", aid);
  await c.click("#observe-tab");
  await expectText(c, "#status", "Observing tab " + aid, "observer status");
  await c.waitForSelector('#remote-regions .region[data-name="Tab memory"]', { timeout: T });
  if (!(await c.locator("#do-write").isDisabled())) throw new Error("the observer's controls should be disabled");
  await a.fill("#w-data", "observed!");
  await a.fill("#w-off", "20");
  await a.click("#do-write");
  await c.waitForFunction(() => {
    const r = document.querySelector('#remote-regions .region[data-name="Tab memory"] .textview');
    return r && r.textContent.includes("observed!");
  }, null, { timeout: T });
  await expectText(c, "#ladder", "RDMA Write", "observer's ladder");
  await c.screenshot({ path: join(out, "10-observer.png"), fullPage: true });
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
