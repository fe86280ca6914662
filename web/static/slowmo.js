// Slow motion: the page draws the events of both peers one at a time, in
// the order they happened, SLOW_MS apart for each placement, delivery,
// FPDU and Terminate, so that a segment's amber cells (placed, its
// message not yet delivered) stay amber long enough to be seen. The
// protocol runs at full speed underneath; only the drawing waits. app.js
// calls slowTake from applyEvents and slowDrain once a frame.
"use strict";

const SLOW_MS = 200;
// SLOW_MAX bounds the queue: past it (a burst of thousands of Writes)
// the oldest events are drawn at once rather than kept for minutes.
const SLOW_MAX = 3000;

const slow = { on: false, queue: [], next: 0, draining: false, shown: null };

// slowTimed says which events take SLOW_MS to draw; the others (sends,
// completions, state changes) are drawn with the timed event before
// them, so that the order stays what it was.
function slowTimed(ev) {
  return ev.kind === "segment-placed" || ev.kind === "message-delivered" || ev.kind === "fpdu" || ev.kind === "terminate";
}

// slowTake queues side's events for slowDrain when slow motion is on and
// reports whether it took them; applyEvents draws them itself otherwise.
function slowTake(side, events) {
  if (!slow.on || slow.draining || !events.length) return false;
  for (const ev of events) slow.queue.push([side, ev]);
  return true;
}

// slowDrain draws the queued events that are due by now.
function slowDrain(now, rows) {
  if (!slow.queue.length) { slowShow(); return; }
  slow.draining = true;
  try {
    while (slow.queue.length) {
      const over = slow.queue.length > SLOW_MAX;
      if (slow.on && !over && now < slow.next) break;
      const [side, ev] = slow.queue.shift();
      applyEvents(side, [ev], now, rows);
      // Paced from the previous event's time, not the frame's, so that
      // a slow frame rate does not stretch every step.
      if (slow.on && !over && slowTimed(ev)) slow.next = (now - slow.next < SLOW_MS ? slow.next : now) + SLOW_MS;
    }
  } finally {
    slow.draining = false;
  }
  slowShow();
}

// slowShow says how many events wait to be drawn.
function slowShow() {
  const n = slow.queue.length;
  const text = slow.on ? (n ? n + " events still to draw" : "drawing as events come") : "";
  if (text === slow.shown) return; // nothing changed: the DOM is left alone
  slow.shown = text;
  const el = document.getElementById("slowmo-left");
  if (!el) return;
  el.textContent = text;
  el.dataset.left = n;
}

function slowSet(on) {
  slow.on = on;
  slow.next = 0;
  slowShow();
}

{
  const box = document.getElementById("slowmo");
  if (box) {
    box.addEventListener("change", () => slowSet(box.checked));
    if (box.checked) slowSet(true);
  }
}
