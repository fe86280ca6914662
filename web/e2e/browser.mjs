// The browser the end-to-end tests drive, chosen by IWARP_BROWSER:
// "chromium" (the default), Debian's chromium driven by playwright-core
// over the DevTools protocol; or "firefox", Debian's firefox-esr driven
// by puppeteer-core over WebDriver BiDi. IWARP_BROWSER_PATH names the
// executable (CHROMIUM too, for chromium).
//
// Playwright drives only its own Firefox build, and its WebDriver BiDi
// channel needs commands firefox-esr 140 does not have. puppeteer-core is
// pinned at 24.25, whose commands firefox-esr 140 all answers: from 24.30
// it sends a screen orientation override, which Firefox 140 lacks, with
// every viewport change. For Firefox, launch returns objects
// with the part of Playwright's API the tests use, with Playwright's
// waiting: a click or a fill waits until its element is visible and
// enabled, selectOption until the option exists, waitForSelector until
// the element is visible. So demo.test.mjs and replay.test.mjs run
// unchanged against either browser.
import { chromium } from "playwright-core";
import puppeteer from "puppeteer-core";

export const browserName = process.env.IWARP_BROWSER || "chromium";

// launch starts the browser: chromiumArgs are chromium's command line,
// firefoxPrefs Firefox's preferences.
export async function launch({ chromiumArgs = [], firefoxPrefs = {} } = {}) {
  if (browserName === "chromium") {
    const exe = process.env.IWARP_BROWSER_PATH || process.env.CHROMIUM || "/usr/bin/chromium";
    return chromium.launch({ executablePath: exe, headless: true, args: chromiumArgs });
  }
  if (browserName !== "firefox") throw new Error(`IWARP_BROWSER=${browserName}: want chromium or firefox`);
  const exe = process.env.IWARP_BROWSER_PATH || "/usr/bin/firefox-esr";
  const b = await puppeteer.launch({
    browser: "firefox", executablePath: exe, headless: true, defaultViewport: null,
    extraPrefsFirefox: firefoxPrefs,
  });
  return new Browser(b);
}

const T = 30000; // Playwright's default timeout for an action
// Conditions are polled from here, every poll ms: puppeteer's
// waitForFunction and locators make their predicates with an eval in the
// page, which the page's Content-Security-Policy refuses in Firefox; and
// a tab that is not its window's selected one draws no frames there to
// poll on.
const poll = 50;

// waitFor evaluates f(...args) in page p until it returns a truthy value,
// and returns that.
async function waitFor(p, f, args, timeout) {
  const end = Date.now() + timeout;
  for (;;) {
    const v = await p.evaluate(f, ...args);
    if (v) return v;
    if (Date.now() >= end) throw new Error(`waiting failed: ${timeout} ms exceeded`);
    await new Promise((r) => setTimeout(r, poll));
  }
}

class Browser {
  constructor(b) { this.b = b; this.ctxs = []; }
  async newContext({ viewport } = {}) {
    const c = new Context(await this.b.createBrowserContext(), viewport);
    this.ctxs.push(c);
    return c;
  }
  async newPage(opts) { return (await this.newContext(opts)).newPage(); }
  contexts() { return this.ctxs; }
  version() { return this.b.version(); }
  close() { return this.b.close(); }
}

class Context {
  constructor(c, viewport) { this.c = c; this.viewport = viewport; this.ps = []; }
  async newPage() {
    const p = await this.c.newPage();
    if (this.viewport) await p.setViewport(this.viewport);
    const w = new Page(p, this);
    this.ps.push(w);
    return w;
  }
  pages() { return this.ps.filter((p) => !p.p.isClosed()); }
}

class Page {
  constructor(p, ctx) {
    this.p = p;
    this.ctx = ctx;
    this.keyboard = { press: (k) => p.keyboard.press(k) };
  }
  on(ev, f) {
    // Playwright's ConsoleMessage and Error have what puppeteer's do.
    this.p.on(ev, f);
  }
  goto(url) { return this.p.goto(url, { waitUntil: "load" }); }
  close() { return this.p.close(); }
  evaluate(f, arg) { return this.p.evaluate(f, arg); }
  async waitForFunction(f, arg, { timeout = T } = {}) {
    return waitFor(this.p, f, [arg], timeout);
  }
  waitForTimeout(ms) { return new Promise((r) => setTimeout(r, ms)); }
  // waitForSelector waits until sel matches a visible element.
  waitForSelector(sel, { timeout = T } = {}) {
    return waitFor(this.p, (s) => {
      const e = document.querySelector(s);
      if (!e) return false;
      const r = e.getBoundingClientRect();
      return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden";
    }, [sel], timeout);
  }
  addInitScript(f) { return this.p.evaluateOnNewDocument(f); }
  setViewportSize(v) { return this.p.setViewport(v); }
  screenshot({ path, fullPage = false }) { return this.p.screenshot({ path, fullPage }); }
  async textContent(sel) {
    await waitFor(this.p, (s) => !!document.querySelector(s), [sel], T);
    return this.p.$eval(sel, (e) => e.textContent);
  }
  locator(sel) { return new Locator(this, sel); }

  // actionable waits as Playwright does before acting on sel: attached,
  // visible (a box and not visibility:hidden) and enabled.
  async actionable(sel, timeout = T) {
    try {
      await waitFor(this.p, (s) => {
        const e = document.querySelector(s);
        if (!e) return false;
        const r = e.getBoundingClientRect();
        return r.width > 0 && r.height > 0 && getComputedStyle(e).visibility !== "hidden" && !e.closest(":disabled");
      }, [sel], timeout);
    } catch (e) {
      throw new Error(`${sel}: not visible and enabled within ${timeout} ms: ${e.message}`);
    }
  }
  async click(sel) {
    await this.actionable(sel);
    await (await this.p.$(sel)).click();
  }
  async focus(sel) {
    await this.actionable(sel);
    await this.p.focus(sel);
  }
  // fill replaces the value of an input as typing does: input and change
  // events follow.
  async fill(sel, value) {
    await this.actionable(sel);
    await this.p.$eval(sel, (e, v) => {
      e.focus();
      e.value = v;
      e.dispatchEvent(new InputEvent("input", { bubbles: true, inputType: "insertText", data: v }));
      e.dispatchEvent(new Event("change", { bubbles: true }));
    }, value);
  }
  async check(sel) { await this.setChecked(sel, true); }
  async uncheck(sel) { await this.setChecked(sel, false); }
  async setChecked(sel, want) {
    await this.actionable(sel);
    if ((await this.p.$eval(sel, (e) => e.checked)) !== want) await this.click(sel);
    if ((await this.p.$eval(sel, (e) => e.checked)) !== want) throw new Error(`${sel}: clicking did not make it ${want ? "checked" : "unchecked"}`);
  }
  // selectOption picks the option whose value or label is v, as a person
  // does: input and change events follow.
  async selectOption(sel, v) {
    await this.actionable(sel);
    try {
      await waitFor(this.p, (s, v) => [...document.querySelector(s).options].some((o) => o.value === v || o.label === v), [sel, v], T);
    } catch (e) {
      throw new Error(`${sel}: no option ${JSON.stringify(v)} within ${T} ms`);
    }
    await this.p.$eval(sel, (e, v) => {
      const o = [...e.options].find((o) => o.value === v) || [...e.options].find((o) => o.label === v);
      e.value = o.value;
      e.dispatchEvent(new Event("input", { bubbles: true }));
      e.dispatchEvent(new Event("change", { bubbles: true }));
    }, v);
  }
  async setInputFiles(sel, path) {
    await waitFor(this.p, (s) => !!document.querySelector(s), [sel], T);
    await (await this.p.$(sel)).uploadFile(path);
  }
}

class Locator {
  constructor(page, sel) { this.page = page; this.sel = sel; }
  count() { return this.page.p.$$eval(this.sel, (es) => es.length); }
  first() { return this; } // the methods below act on the first match
  click() { return this.page.click(this.sel); }
  async isDisabled() {
    await waitFor(this.page.p, (s) => !!document.querySelector(s), [this.sel], T);
    return this.page.p.$eval(this.sel, (e) => !!e.closest(":disabled"));
  }
}
