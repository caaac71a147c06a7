/* SPDX-License-Identifier: MIT */
/* tuna report --html: the page's script (embedded by report_js.c).
 * The sortable command table and the timeline's zoom, pan and focus; the
 * state (sort column and direction, the timeline's view) is read from the
 * URL fragment at load and written back on every change:
 *   #sort=energy&dir=desc&focus=generation   or   #view=120.5-340 (ms)
 * The page is drawn for the whole run without the script. */
(function () {
  'use strict';
  var state = { sort: 'total', dir: 'desc', view: null, focus: null };

  function parseHash() {
    var h = (location.hash || '').replace(/^#/, '');
    h.split('&').forEach(function (kv) {
      var i = kv.indexOf('=');
      if (i < 0) return;
      var k = decodeURIComponent(kv.slice(0, i)), v = decodeURIComponent(kv.slice(i + 1));
      if (k === 'sort' || k === 'dir' || k === 'focus') state[k] = v;
      if (k === 'view') {
        var m = /^(-?[0-9.]+)-(-?[0-9.]+)$/.exec(v);
        if (m && +m[2] > +m[1]) state.view = [+m[1] * 1e3, +m[2] * 1e3];
      }
    });
  }

  function writeHash() {
    var p = ['sort=' + state.sort, 'dir=' + state.dir];
    if (state.focus) p.push('focus=' + state.focus);
    else if (state.view) p.push('view=' + (state.view[0] / 1e3).toFixed(3) + '-' +
                                (state.view[1] / 1e3).toFixed(3));
    try { history.replaceState(null, '', '#' + p.join('&')); } catch (e) { /* file: */ }
  }

  /* ---- the command table ---- */
  var table = document.getElementById('commands');

  function cellValue(tr, col) {
    var td = tr.cells[col];
    var v = td.getAttribute('data-v');
    return v === null ? td.textContent : parseFloat(v);
  }

  function sortTable(key, dir) {
    if (!table) return;
    var ths = table.tHead.rows[0].cells, col = -1;
    for (var i = 0; i < ths.length; i++) {
      ths[i].classList.remove('sorted-asc', 'sorted-desc');
      ths[i].removeAttribute('aria-sort');
      if (ths[i].getAttribute('data-key') === key) col = i;
    }
    if (col < 0) return false;
    var body = table.tBodies[0], rows = Array.prototype.slice.call(body.rows);
    var sgn = dir === 'asc' ? 1 : -1;
    rows.sort(function (a, b) {
      var x = cellValue(a, col), y = cellValue(b, col);
      var c = typeof x === 'number' ? x - y : String(x).localeCompare(String(y));
      return c * sgn;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    ths[col].classList.add(dir === 'asc' ? 'sorted-asc' : 'sorted-desc');
    ths[col].setAttribute('aria-sort', dir === 'asc' ? 'ascending' : 'descending');
    state.sort = key;
    state.dir = dir;
    return true;
  }

  if (table) {
    table.tHead.addEventListener('click', function (ev) {
      var th = ev.target.closest('th[data-key]');
      if (!th) return;
      var key = th.getAttribute('data-key');
      var text = key === 'name' || key === 'phase' || key === 'bound';
      var dir = key === state.sort ? (state.dir === 'desc' ? 'asc' : 'desc')
                                   : (text ? 'asc' : 'desc');
      sortTable(key, dir);
      writeHash();
    });
  }

  /* ---- the timeline ---- */
  var svg = document.getElementById('timeline');
  var NS = 'http://www.w3.org/2000/svg';

  function niceStep(span, n) {
    var raw = span / n, p = Math.pow(10, Math.floor(Math.log10(raw))), m = raw / p;
    return (m < 1.5 ? 1 : m < 3.5 ? 2 : m < 7.5 ? 5 : 10) * p;
  }

  function timeLabel(us, step) {
    if (step >= 1e6) return (us / 1e6).toFixed(step >= 1e7 ? 0 : 1) + ' s';
    if (step >= 1e3) return (us / 1e3).toFixed(step >= 1e4 ? 0 : 1) + ' ms';
    return us.toFixed(step >= 10 ? 0 : 1) + ' us';
  }

  function el(name, attrs, text) {
    var e = document.createElementNS(NS, name);
    for (var k in attrs) e.setAttribute(k, attrs[k]);
    if (text !== undefined) e.textContent = text;
    return e;
  }

  if (svg) {
    var T0 = parseFloat(svg.getAttribute('data-t0')), T1 = parseFloat(svg.getAttribute('data-t1'));
    var G0 = parseFloat(svg.getAttribute('data-gen0')), G1 = parseFloat(svg.getAttribute('data-gen1'));
    var W = parseFloat(svg.getAttribute('data-w'));
    var slices = svg.querySelectorAll('[data-t]');
    var curves = document.querySelectorAll('svg.curve');
    /* the time axis of el over [a, b] at (x0, y): 1-2-5 ticks, times since
     * the first event */
    var drawAxis = function (target, x0, y, a, b) {
      var span = b - a, old = target.querySelector('g.time-axis'), g = el('g', { 'class': 'time-axis' });
      g.appendChild(el('line', { x1: x0, y1: y, x2: x0 + W, y2: y, stroke: '#333' }));
      var step = niceStep(span, 10), first = Math.ceil((a - T0) / step) * step;
      for (var tt = first; tt <= b - T0 + step * 1e-9; tt += step) {
        var x = (x0 + (tt + T0 - a) / span * W).toFixed(1);
        g.appendChild(el('line', { x1: x, y1: y, x2: x, y2: y + 4, stroke: '#333' }));
        g.appendChild(el('text', { x: x, y: y + 15, 'font-size': 10, 'text-anchor': 'middle' },
                         timeLabel(tt, step)));
      }
      if (old) old.parentNode.replaceChild(g, old); else target.appendChild(g);
    };
    var cur = [T0, T1];
    var MIN_SPAN = 1; /* us */

    var setView = function (a, b, focus) {
      var span = Math.max(b - a, MIN_SPAN), whole = T1 - T0;
      if (span > whole) span = whole;
      if (a < T0) a = T0;
      if (a + span > T1) a = T1 - span;
      b = a + span;
      cur = [a, b];
      for (var i = 0; i < slices.length; i++) {
        var s = slices[i], t = parseFloat(s.getAttribute('data-t')), d = parseFloat(s.getAttribute('data-d'));
        if (t + d < a || t > b) { s.setAttribute('display', 'none'); continue; }
        s.removeAttribute('display');
        var x0 = Math.max(t, a), x1 = Math.min(t + d, b);
        s.setAttribute('x', (10 + (x0 - a) / span * W).toFixed(2));
        s.setAttribute('width', Math.max(0.5, (x1 - x0) / span * W).toFixed(2));
      }
      var ll = svg.querySelector('.label-load'), lg = svg.querySelector('.label-generation');
      /* the phase labels at the start of their phase in view (load: when in view) */
      if (ll) {
        ll.setAttribute('x', '12');
        if (G0 <= a) ll.setAttribute('display', 'none'); else ll.removeAttribute('display');
      }
      if (lg) lg.setAttribute('x', (12 + (Math.min(Math.max(G0, a), b) - a) / span * W).toFixed(1));
      drawAxis(svg, 10, 120, a, b);
      /* the curves below: the same view */
      for (var c = 0; c < curves.length; c++) {
        var pl = curves[c].querySelector('polyline'), ts = pl.tuna_ts, pts = pl.tuna_pts;
        if (!ts) {
          ts = pl.tuna_ts = pl.getAttribute('data-ts').trim().split(/ +/).map(Number);
          pts = pl.tuna_pts = pl.getAttribute('points').trim().split(/ +/).map(function (q) {
            return q.split(',')[1];
          });
        }
        pl.setAttribute('points', ts.map(function (t, i) {
          return (70 + (t - a) / span * W).toFixed(1) + ',' + pts[i];
        }).join(' '));
        drawAxis(curves[c], 70, parseFloat(curves[c].getAttribute('data-axis-y')), a, b);
      }
      svg.setAttribute('data-view-a', ((a - T0) / 1e3).toFixed(3));
      svg.setAttribute('data-view-b', ((b - T0) / 1e3).toFixed(3));
      state.focus = focus || null;
      state.view = a <= T0 && b >= T1 ? null : [a - T0, b - T0];
      var r = document.getElementById('timeline-range');
      if (r) r.textContent = 'view: ' + ((a - T0) / 1e3).toFixed(3) + ' .. ' +
        ((b - T0) / 1e3).toFixed(3) + ' ms of ' + ((T1 - T0) / 1e3).toFixed(3) + ' ms' +
        (focus ? ' (' + focus + ')' : '');
    };

    var focusOn = function (what) {
      if (what === 'generation' && G1 > G0) setView(G0, G1, 'generation');
      else setView(T0, T1, null);
    };
    var zoom = function (factor, at) { /* at: trace time kept in place */
      var a = cur[0], b = cur[1];
      if (at === undefined) at = (a + b) / 2;
      setView(at - (at - a) * factor, at + (b - at) * factor, null);
    };
    var pan = function (frac) {
      var s = cur[1] - cur[0];
      setView(cur[0] + frac * s, cur[1] + frac * s, null);
    };
    var timeAt = function (clientX) {
      var box = svg.getBoundingClientRect();
      return cur[0] + (clientX - box.left - 10) / W * (cur[1] - cur[0]);
    };

    document.getElementById('timeline-controls').addEventListener('click', function (ev) {
      var b = ev.target.closest('button');
      if (!b) return;
      if (b.hasAttribute('data-view')) focusOn(b.getAttribute('data-view'));
      if (b.hasAttribute('data-zoom')) zoom(parseFloat(b.getAttribute('data-zoom')));
      if (b.hasAttribute('data-pan')) pan(parseFloat(b.getAttribute('data-pan')));
      writeHash();
    });
    svg.addEventListener('wheel', function (ev) {
      ev.preventDefault();
      zoom(ev.deltaY < 0 ? 0.8 : 1.25, timeAt(ev.clientX));
      writeHash();
    }, { passive: false });
    var drag = null;
    svg.addEventListener('mousedown', function (ev) {
      drag = { x: ev.clientX, a: cur[0], b: cur[1] };
      ev.preventDefault();
    });
    window.addEventListener('mousemove', function (ev) {
      if (!drag) return;
      var dt = (ev.clientX - drag.x) / W * (drag.b - drag.a);
      setView(drag.a - dt, drag.b - dt, null);
    });
    window.addEventListener('mouseup', function () {
      if (drag) { drag = null; writeHash(); }
    });
    /* hover details: the slice's title in the detail line */
    var detail = document.getElementById('timeline-detail');
    svg.addEventListener('mouseover', function (ev) {
      var s = ev.target.closest('[data-t]');
      if (!s || !detail) return;
      var t = s.querySelector('title');
      detail.textContent = t ? t.textContent + ' at ' +
        ((parseFloat(s.getAttribute('data-t')) - T0) / 1e3).toFixed(3) + ' ms' : '';
    });

    parseHash();
    if (state.view) setView(T0 + state.view[0], T0 + state.view[1], null);
    else focusOn(state.focus);
  } else {
    parseHash();
  }
  if (state.sort !== 'total' || state.dir !== 'desc') sortTable(state.sort, state.dir);
  writeHash();
})();
