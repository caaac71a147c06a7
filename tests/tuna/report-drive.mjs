// SPDX-License-Identifier: MIT
// Drives tuna's HTML report in headless Chromium through the DevTools
// protocol (over --remote-debugging-pipe: no npm package, no port) and
// checks what a user does with it (tests/tuna/browser-check):
//   - the view in the URL fragment (#sort=energy&focus=generation) is the
//     one shown: the command table sorted by energy, the timeline's axis
//     over the generation phase;
//   - clicking a column header sorts by it (twice: the other way);
//   - the mouse wheel zooms the timeline at the pointer, dragging pans it,
//     the buttons show the whole run; the axis ticks follow;
//   - hovering a command shows its details;
//   - the expert heatmap has a cell per (MoE layer, expert) with the
//     selections of `tuna report --json`;
//   - the header's times are those of `tuna report`'s text and --json;
//   - the per-layer table is --json's; the device memory and KV cache
//     curves have a point per sample of the trace (--trace), on their scale;
//   - no script error.
// The expected values come from `tuna report --json` / the text report,
// not from the page. With --shots DIR it also saves one PNG per view
// (scripts/tuna-report-screenshot: the images of docs/tuna.md).
//
// node report-drive.mjs --browser CHROMIUM --page report.html
//      --report-json report.json --report-text report.txt [--trace trace.json]
//      [--shots DIR]
import { spawn } from 'node:child_process';
import { readFileSync, writeFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

const args = {};
for (let i = 2; i < process.argv.length; i += 2) args[process.argv[i].replace(/^--/, '')] = process.argv[i + 1];
for (const k of ['browser', 'page', 'report-json', 'report-text'])
  if (!args[k]) { console.error(`report-drive: missing --${k}`); process.exit(2); }

let passed = 0, failed = 0;
const check = (ok, what, detail) => {
  if (ok) { passed++; console.log(`PASS ${what}`); }
  else { failed++; console.log(`FAIL ${what}${detail ? ': ' + detail : ''}`); }
};
const near = (a, b, tol) => Math.abs(a - b) <= tol;

const rep = JSON.parse(readFileSync(args['report-json'], 'utf8'));
const text = readFileSync(args['report-text'], 'utf8');

// ---- the browser, over the DevTools pipe (fd 3: to it, fd 4: from it) ----
const profile = mkdtempSync(join(tmpdir(), 'tuna-drive-'));
const chrome = spawn(args.browser, [
  '--headless', '--no-sandbox', '--disable-gpu', '--hide-scrollbars', '--no-first-run',
  '--no-default-browser-check', '--disable-extensions', '--disable-sync',
  '--disable-background-networking', '--disable-component-update', '--mute-audio',
  `--user-data-dir=${profile}`, '--remote-debugging-pipe', 'about:blank',
], { stdio: ['ignore', 'ignore', 'pipe', 'pipe', 'pipe'], env: { ...process.env, HOME: profile } });
let stderr = '';
chrome.stdio[2].on('data', (d) => { stderr += d; });
const toB = chrome.stdio[3], fromB = chrome.stdio[4];
let nextId = 1, buf = Buffer.alloc(0);
const pending = new Map(), listeners = [];
fromB.on('data', (d) => {
  buf = Buffer.concat([buf, d]);
  let z;
  while ((z = buf.indexOf(0)) >= 0) {
    const msg = JSON.parse(buf.subarray(0, z).toString('utf8'));
    buf = buf.subarray(z + 1);
    if (msg.id && pending.has(msg.id)) {
      const { ok, ko, method } = pending.get(msg.id);
      pending.delete(msg.id);
      if (msg.error) ko(new Error(`${method}: ${msg.error.message}`)); else ok(msg.result);
    } else if (msg.method) listeners.forEach((l) => l(msg));
  }
});
const send = (method, params = {}, sessionId) => new Promise((ok, ko) => {
  const id = nextId++;
  pending.set(id, { ok, ko, method });
  toB.write(JSON.stringify({ id, method, params, ...(sessionId ? { sessionId } : {}) }) + '\0');
});
const waitEvent = (method, ms = 30000) => new Promise((ok, ko) => {
  const t = setTimeout(() => ko(new Error(`no ${method} in ${ms} ms`)), ms);
  const l = (m) => { if (m.method === method) { clearTimeout(t); listeners.splice(listeners.indexOf(l), 1); ok(m); } };
  listeners.push(l);
});
const errors = [];
listeners.push((m) => {
  if (m.method === 'Runtime.exceptionThrown') errors.push(m.params.exceptionDetails.exception?.description || m.params.exceptionDetails.text);
  if (m.method === 'Runtime.consoleAPICalled' && m.params.type === 'error') errors.push(JSON.stringify(m.params.args));
  if (m.method === 'Log.entryAdded' && m.params.entry.level === 'error') errors.push(m.params.entry.text);
});

let session;
const S = (method, params) => send(method, params, session);
const evaluate = async (expr) => {
  const r = await S('Runtime.evaluate', { expression: expr, returnByValue: true });
  if (r.exceptionDetails) throw new Error(`evaluate: ${r.exceptionDetails.exception?.description || r.exceptionDetails.text}`);
  return r.result.value;
};
const mouse = (type, x, y, extra = {}) => S('Input.dispatchMouseEvent', { type, x, y, button: 'left', clickCount: 1, ...extra });
const click = async (x, y) => { await mouse('mousePressed', x, y); await mouse('mouseReleased', x, y); };
const center = (sel) => evaluate(`(() => { const e = document.querySelector(${JSON.stringify(sel)});
  e.scrollIntoView({block: 'center'}); const b = e.getBoundingClientRect();
  return [b.left + b.width / 2, b.top + b.height / 2]; })()`);

// The page's state, read from the DOM.
const tableRows = () => evaluate(`Array.from(document.querySelectorAll('#commands tbody tr')).map(r => ({
  name: r.cells[0].textContent, phase: r.cells[1].textContent,
  gbps: +r.cells[8].getAttribute('data-v'), energy: +r.cells[10].getAttribute('data-v') }))`);
const view = () => evaluate(`(() => { const s = document.getElementById('timeline');
  return { a: +s.getAttribute('data-view-a'), b: +s.getAttribute('data-view-b'),
    ticks: Array.from(s.querySelectorAll('g.time-axis text')).map(t => t.textContent),
    hash: location.hash }; })()`);
const tickMs = (t) => {
  const m = /^(-?[0-9.]+) (us|ms|s)$/.exec(t);
  return m ? +m[1] * (m[2] === 'us' ? 1e-3 : m[2] === 's' ? 1e3 : 1) : NaN;
};
const ticksInside = (v) => {
  const ms = v.ticks.map(tickMs);
  const span = v.b - v.a;
  return ms.length >= 3 && ms.every((t) => t >= v.a - 1e-3 * span && t <= v.b + 1e-3 * span) &&
    ms[0] - v.a <= span / 3 && v.b - ms[ms.length - 1] <= span / 3;
};
const sortedBy = (rows, k, dir) => rows.every((r, i) => i === 0 ||
  (dir === 'desc' ? rows[i - 1][k] >= r[k] : rows[i - 1][k] <= r[k]));

const wallMs = rep.wall_time_us / 1e3, loadMs = rep.load_time_us / 1e3, genMs = rep.generation_time_us / 1e3;

async function main() {
  const { targetId } = await send('Target.createTarget', { url: 'about:blank' });
  ({ sessionId: session } = await send('Target.attachToTarget', { targetId, flatten: true }));
  await S('Page.enable');
  await S('Runtime.enable');
  await S('Log.enable');
  await S('Emulation.setDeviceMetricsOverride', { width: 1400, height: 900, deviceScaleFactor: 1, mobile: false });
  const url = 'file://' + resolve(args.page) + '#sort=energy&focus=generation';
  const loaded = waitEvent('Page.loadEventFired');
  await S('Page.navigate', { url });
  await loaded;

  // 1. the view in the fragment
  let rows = await tableRows();
  const groups = rep.groups;
  const maxE = groups.reduce((m, g) => (g.energy_uj > m.energy_uj ? g : m), groups[0]);
  check(rows.length === groups.length && sortedBy(rows, 'energy', 'desc') &&
        near(rows[0].energy, maxE.energy_uj, 1e-4 * maxE.energy_uj + 1e-3),
        '#sort=energy: the command table in decreasing energy, first the group of most energy in tuna report --json',
        `first ${rows[0]?.name} ${rows[0]?.energy} uJ, expected ${maxE.name} ${maxE.energy_uj}`);
  check(await evaluate(`document.querySelector('th[data-key=energy]').className`) === 'sorted-desc',
        'the energy column is marked as the sort (descending)');
  let v = await view();
  check(near(v.a, loadMs, 0.002) && near(v.b, loadMs + genMs, 0.002) && ticksInside(v),
        '#focus=generation: the timeline axis spans the generation phase of tuna report --json',
        `view ${v.a}..${v.b} ms, generation ${loadMs}..${loadMs + genMs} ms, ticks ${v.ticks.join(', ')}`);
  const curveTicks = await evaluate(`Array.from(document.querySelectorAll('svg.curve')).map(s =>
    Array.from(s.querySelectorAll('g.time-axis text')).map(t => t.textContent).join())`);
  check(curveTicks.length >= 2 && curveTicks.every((t) => t === v.ticks.join()),
        'the utilisation and memory curves follow the timeline view (the same axis ticks)', curveTicks[0]);
  check(await evaluate(`Array.from(document.querySelectorAll('#timeline rect.cmd')).some(r =>
          r.getAttribute('display') !== 'none' && +r.getAttribute('x') >= 10 && +r.getAttribute('x') <= 1210)`),
        'commands of the generation are drawn inside the focused timeline');

  // 2. sort by clicking a column (twice: the other way)
  let [x, y] = await center('th[data-key=gbps]');
  await click(x, y);
  rows = await tableRows();
  v = await view();
  check(sortedBy(rows, 'gbps', 'desc') && /sort=gbps&dir=desc/.test(v.hash),
        'a click on GB/s sorts by it, decreasing, and the address says so', v.hash);
  [x, y] = await center('th[data-key=gbps]');
  await click(x, y);
  rows = await tableRows();
  v = await view();
  check(sortedBy(rows, 'gbps', 'asc') && !sortedBy(rows, 'gbps', 'desc') && /dir=asc/.test(v.hash),
        'a second click sorts it increasing', v.hash);

  // 3. zoom with the wheel at the pointer, pan by dragging
  const before = await view();
  const box = await evaluate(`(() => { const s = document.getElementById('timeline');
    s.scrollIntoView({block: 'center'}); const b = s.getBoundingClientRect(); return [b.left, b.top]; })()`);
  const px = box[0] + 10 + 900, py = box[1] + 80; // 3/4 into the drawing area
  const at = before.a + 900 / 1200 * (before.b - before.a);
  await mouse('mouseWheel', px, py, { deltaX: 0, deltaY: -100 });
  v = await view();
  const span0 = before.b - before.a, span1 = v.b - v.a;
  check(near(span1, 0.8 * span0, 0.01 * span0) &&
        near(v.a + 900 / 1200 * span1, at, 0.01 * span0) && ticksInside(v) &&
        v.ticks.join() !== before.ticks.join(),
        'the wheel zooms in at the pointer (span x 0.8, the time under the pointer stays) and the axis follows',
        `${before.a}..${before.b} -> ${v.a}..${v.b}, pointer ${at} ms, ticks ${v.ticks.join(', ')}`);
  const z = v;
  await mouse('mousePressed', box[0] + 10 + 600, py);
  await mouse('mouseMoved', box[0] + 10 + 300, py);
  await mouse('mouseReleased', box[0] + 10 + 300, py);
  v = await view();
  const shift = 300 / 1200 * (z.b - z.a);
  check(near(v.a - z.a, Math.min(shift, wallMs - z.b), 0.01 * (z.b - z.a)) && near(v.b - v.a, z.b - z.a, 1e-3 * (z.b - z.a)) &&
        ticksInside(v) && /view=/.test(v.hash),
        'dragging 300 px left pans a quarter of the view later; the axis follows; the view is in the address',
        `${z.a}..${z.b} -> ${v.a}..${v.b}, ${v.hash}`);

  // 4. hover details
  const hov = await evaluate(`(() => { const r = Array.from(document.querySelectorAll('#timeline rect.cmd'))
      .filter(r => r.getAttribute('display') !== 'none' && +r.getAttribute('width') >= 1)[0];
    if (!r) return null; const b = r.getBoundingClientRect();
    return [b.left + b.width / 2, b.top + b.height / 2, r.querySelector('title').textContent]; })()`);
  if (hov) {
    await mouse('mouseMoved', hov[0], hov[1], { button: 'none' });
    const d = await evaluate(`document.getElementById('timeline-detail').textContent`);
    check(d.startsWith(hov[2]) && / ms$/.test(d), 'hovering a command shows its details', d);
  } else check(false, 'hovering a command shows its details', 'no command drawn in the view');

  // 5. the whole run
  [x, y] = await center('button[data-view=all]');
  await click(x, y);
  v = await view();
  check(near(v.a, 0, 0.002) && near(v.b, wallMs, 0.002) && ticksInside(v),
        '"whole run" shows the wall time of tuna report --json', `${v.a}..${v.b} ms, wall ${wallMs}`);

  // 6. the header's times: tuna report's text and --json
  const hdr = await evaluate(`(() => { const h = document.getElementById('header-times');
    return { text: h.textContent, cmd: +h.getAttribute('data-command-us'), job: +h.getAttribute('data-job-us'),
             wall: +h.getAttribute('data-wall-us') }; })()`);
  const tm = /: ([0-9.]+) us of commands, ([0-9.]+) us of jobs/.exec(text);
  const tw = /^wall time ([0-9.]+) ms .* of which ([0-9.]+) ms jobs on the device and ([0-9.]+) ms host time/m.exec(text);
  check(tm && tw && hdr.text.includes(`(${tm[1]} us of commands, ${tm[2]} us of jobs)`) &&
        hdr.text.includes(`wall time ${tw[1]} ms`) && hdr.text.includes(`difference, ${tw[3]} ms, is host time`) &&
        near(hdr.cmd, rep.command_time_us, 0.1) && near(hdr.job, rep.job_time_us, 0.1) &&
        near(hdr.wall, rep.wall_time_us, 0.1),
        "the header's wall, device and host times are tuna report's (text and --json)", hdr.text.slice(0, 300));

  // 7. the expert heatmap
  if (rep.experts && rep.experts.length) {
    const x0 = rep.experts[0];
    const cells = await evaluate(`Array.from(document.querySelectorAll('#expert-heatmap rect.cell')).map(c =>
      [+c.getAttribute('data-layer'), +c.getAttribute('data-expert'), +c.getAttribute('data-sel')])`);
    const perLayer = {};
    cells.forEach(([l, , s]) => { perLayer[l] = (perLayer[l] || 0) + s; });
    check(cells.length === x0.layers.length * x0.experts &&
          x0.layers.every((L) => perLayer[L.layer] === L.selections),
          'the expert heatmap: a cell per (MoE layer, expert), each layer adding up to its selections in tuna report --json',
          `${cells.length} cells, ${JSON.stringify(perLayer)}`);
    if ('cache_hits' in x0.layers[0])
      check(await evaluate(`document.querySelectorAll('#expert-cache-heatmap rect.cell').length`) === cells.length,
            'the expert-cache heatmap (hit rate per cell) is drawn');
  }
  // 8. per-layer time and the device memory over time
  const lrows = await evaluate(`Array.from(document.querySelectorAll('#layers tr')).slice(1).map(r =>
    [r.cells[0].textContent, +r.cells[1].textContent])`);
  check(lrows.length === rep.layers.length && rep.layers.every((L, i) =>
          lrows[i][0] === L.layer && near(lrows[i][1], L.time_us / 1e3, 0.0006)),
        "the per-layer table: tuna report --json's layers and times, longest first", JSON.stringify(lrows.slice(0, 3)));
  if (args.trace) {
    const tr = JSON.parse(readFileSync(args.trace, 'utf8'));
    const mem = tr.traceEvents.filter((e) => e.ph === 'C' && e.name === 'device memory').map((e) => e.args.value);
    const kv = tr.traceEvents.filter((e) => e.ph === 'C' && e.name === 'KV cache used').map((e) => e.args.value);
    const curve = (id) => evaluate(`(() => { const s = document.getElementById('${id}'); if (!s) return null;
      const pts = s.querySelector('polyline').getAttribute('points').trim().split(/ +/).map(p => p.split(',').map(Number));
      const ticks = Array.from(s.querySelectorAll('text')).map(t => t.textContent);
      return { pts, ticks }; })()`);
    const cm = await curve('curve-memory'), ck = await curve('curve-kv');
    // each sample at its height on the curve's scale (0 .. the largest sample: y 130 .. 10)
    const onScale = (c, v) => c && c.pts.length === v.length && c.pts.every(([px, py], i) =>
      px >= 70 && px <= 1270 && (i === 0 || px >= c.pts[i - 1][0]) &&
      near(py, 130 - v[i] / Math.max(...v) * 120, 0.06));
    const mib = Math.max(...mem) / 1048576;
    check(onScale(cm, mem) && cm.ticks.includes(`${+mib.toPrecision(4)} MiB`),
          'device memory over time: one point per sample of the trace, in time order, on its scale',
          `${cm?.pts.length} points, ${mem.length} samples, max ${mib} MiB, ticks ${cm?.ticks.slice(0, 6)}`);
    check(onScale(ck, kv), 'KV cache used over time: one point per pass, in time order, on its own scale',
          `${ck?.pts.length} points, ${kv.length} samples, last ${JSON.stringify(ck?.pts.slice(-3))}`);
  }
  check(errors.length === 0, 'no script errors', errors.join('; '));

  // 9. one screenshot per view (docs/tuna.md)
  if (args.shots) {
    await S('Emulation.setDeviceMetricsOverride', { width: 1400, height: 900, deviceScaleFactor: 1, mobile: false });
    const nav = waitEvent('Page.loadEventFired');
    await S('Page.navigate', { url: 'about:blank' });
    await nav;
    const nav2 = waitEvent('Page.loadEventFired');
    await S('Page.navigate', { url: 'file://' + resolve(args.page) + '#sort=energy&focus=generation' });
    await nav2;
    const views = await evaluate(`Array.from(document.querySelectorAll('section[id^=view-]')).map(s => s.id)`);
    for (const id of views) {
      const r = await evaluate(`(() => { const b = document.getElementById('${id}').getBoundingClientRect();
        return [b.left + scrollX, b.top + scrollY, Math.min(b.width, 1360), Math.min(b.height, 900)]; })()`);
      const shot = await S('Page.captureScreenshot', { format: 'png', captureBeyondViewport: true,
        clip: { x: r[0], y: r[1], width: r[2], height: r[3], scale: 1 } });
      const out = join(args.shots, `tuna-${id.replace(/^view-/, '')}.png`);
      writeFileSync(out, Buffer.from(shot.data, 'base64'));
      console.log(`report-drive: wrote ${out}`);
    }
  }
}

let rc = 1;
const watchdog = setTimeout(() => { console.log('FAIL the browser did not answer in 120 s'); finish(1); }, 120000);
function finish(code) {
  clearTimeout(watchdog);
  try { toB.write(JSON.stringify({ id: nextId++, method: 'Browser.close', params: {} }) + '\0'); } catch { /* gone */ }
  const kill = setTimeout(() => chrome.kill('SIGKILL'), 5000);
  chrome.on('exit', () => {
    clearTimeout(kill);
    rmSync(profile, { recursive: true, force: true });
    process.exit(code);
  });
  if (chrome.exitCode !== null || chrome.signalCode !== null) chrome.emit('exit');
}
main().then(() => { rc = failed ? 1 : 0; }, (e) => {
  console.log(`FAIL ${e.message}`);
  if (stderr) console.log(stderr.split('\n').slice(-10).join('\n'));
}).finally(() => {
  console.log(`report-drive: ${passed} passed, ${failed} failed`);
  finish(failed || rc ? 1 : 0);
});
