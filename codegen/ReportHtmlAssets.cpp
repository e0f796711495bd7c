//===- ReportHtmlAssets.cpp - The style and script of report pages --------===//
//
// Inline CSS and JavaScript shared by report.html and compare.html. The
// script reads the page's data from a JSON script element, draws on
// canvases (no network, no external resources), fills the tables with
// textContent only (names from the model are never parsed as HTML), and
// records what it drew on <body> as data attributes -- data-drawn="yes",
// counts of points, slices and rows, and the number of painted pixels per
// canvas -- so a headless browser's DOM dump shows that it worked.
//
//===----------------------------------------------------------------------===//
#include "codegen/ReportHtml.h"

namespace memfit {

const char *reportCss() {
  return R"css(
body { font: 14px/1.4 system-ui, sans-serif; margin: 24px; color: #222;
       max-width: 1040px; }
h1 { font-size: 20px; margin: 0 0 4px; }
h2 { font-size: 16px; margin: 28px 0 8px; }
.meta { color: #555; margin: 0 0 16px; }
.cards { display: flex; flex-wrap: wrap; gap: 12px; }
.card { border: 1px solid #ddd; border-radius: 6px; padding: 8px 12px;
        min-width: 200px; }
.card h3 { font-size: 13px; margin: 0 0 4px; color: #555; font-weight: 600; }
.card div { white-space: nowrap; }
.ok { color: #2a7a2a; font-weight: 600; }
.bad { color: #b22; font-weight: 600; }
canvas { width: 100%; border: 1px solid #eee; }
table { border-collapse: collapse; font-size: 13px; }
th, td { padding: 2px 10px 2px 0; text-align: left; white-space: nowrap;
         vertical-align: top; }
td.why { white-space: normal; min-width: 240px; color: #444; }
td.n, th.n { text-align: right; }
tr:nth-child(even) td { background: #f7f7f7; }
.legend span { display: inline-block; margin-right: 14px; }
.legend i { display: inline-block; width: 12px; height: 12px;
            margin-right: 4px; vertical-align: -2px; }
#tip { position: fixed; pointer-events: none; background: #fffbe6;
       border: 1px solid #cc9; padding: 2px 6px; font-size: 12px;
       display: none; }
.note { color: #555; font-size: 13px; }
)css";
}

const char *reportScript() {
  return R"js(
(function () {
  'use strict';
  var COLORS = {
    'FP': '#4e79a7', 'BP-data': '#f28e2b', 'BP-weight': '#e15759',
    'loss': '#76b7b2', 'update': '#59a14f', 'recompute': '#af7aa1',
    'offload': '#9c755f', 'prefetch': '#edc948', 'load': '#bab0ac'
  };
  var SERIES = ['#4e79a7', '#f28e2b', '#e15759', '#76b7b2', '#59a14f',
                '#edc948', '#af7aa1', '#9c755f'];
  var UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

  function fmtBytes(b) {
    var u = 0;
    while (Math.abs(b) >= 1024 && u < 4) { b /= 1024; u++; }
    return u === 0 ? Math.round(b) + ' B' : b.toFixed(2) + ' ' + UNITS[u];
  }
  function fmtTime(s) {
    if (s >= 1) return s.toFixed(2) + ' s';
    if (s === 0) return '0';
    if (s >= 1e-3) return (s * 1e3).toFixed(2) + ' ms';
    return (s * 1e6).toFixed(1) + ' us';
  }
  function pct(x) { return (x * 100).toFixed(1) + '%'; }
  function niceStep(max, n) {
    var raw = max / n, p = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = raw / p;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * p;
  }
  function context(canvas) {
    var ctx = canvas.getContext('2d');
    ctx.font = '12px sans-serif';
    return ctx;
  }
  /* Painted pixels: proof that the canvas was drawn on. */
  function ink(canvas) {
    var d = canvas.getContext('2d')
                .getImageData(0, 0, canvas.width, canvas.height).data;
    var n = 0;
    for (var i = 3; i < d.length; i += 4) if (d[i] !== 0) n++;
    return n;
  }
  function axes(ctx, box, xmax, ymax, xfmt, yfmt, xlabel, noY) {
    ctx.lineWidth = 1;
    if (!noY) {
      var ys = niceStep(ymax, 5);
      ctx.textAlign = 'right';
      ctx.textBaseline = 'middle';
      for (var v = 0; v <= ymax * (1 + 1e-9); v += ys) {
        var y = box.y + box.h - v / ymax * box.h;
        ctx.strokeStyle = '#eee';
        ctx.beginPath(); ctx.moveTo(box.x + 1, y);
        ctx.lineTo(box.x + box.w, y); ctx.stroke();
        ctx.fillStyle = '#333';
        ctx.fillText(yfmt(v), box.x - 6, y);
      }
    }
    var xs = niceStep(xmax, 8);
    ctx.textAlign = 'center';
    ctx.textBaseline = 'top';
    ctx.fillStyle = '#333';
    for (var u = 0; u <= xmax * (1 + 1e-9); u += xs)
      ctx.fillText(xfmt(u), box.x + u / xmax * box.w, box.y + box.h + 4);
    if (xlabel) {
      ctx.textAlign = 'center';
      ctx.fillText(xlabel, box.x + box.w / 2, box.y + box.h + 20);
    }
    ctx.strokeStyle = '#999';
    ctx.beginPath(); ctx.moveTo(box.x, box.y);
    ctx.lineTo(box.x, box.y + box.h); ctx.lineTo(box.x + box.w, box.y + box.h);
    ctx.stroke();
  }
  function legend(el, items) {
    items.forEach(function (it) {
      var s = document.createElement('span'), i = document.createElement('i');
      i.style.background = it[1];
      s.appendChild(i);
      s.appendChild(document.createTextNode(it[0]));
      el.appendChild(s);
    });
  }
  function cell(tr, text, cls, title) {
    var td = document.createElement('td');
    td.textContent = text;
    if (cls) td.className = cls;
    if (title) td.title = title;
    tr.appendChild(td);
  }

  function drawMemory(D, res) {
    var c = document.getElementById('memory'), ctx = context(c);
    var box = {x: 90, y: 12, w: c.width - 110, h: c.height - 48};
    var T = D.roundSeconds > 0 ? D.roundSeconds : 1;
    var peak = 0;
    D.arena.forEach(function (p) { peak = Math.max(peak, p[1]); });
    var ymax = Math.max(D.budget, D.resident + peak, D.lowerBound, 1) * 1.08;
    axes(ctx, box, T, ymax, fmtTime, fmtBytes, 'time within one round');
    function X(t) { return box.x + Math.min(t, T) / T * box.w; }
    function Y(b) { return box.y + box.h - b / ymax * box.h; }
    ctx.fillStyle = 'rgba(89,161,79,0.3)';
    ctx.fillRect(box.x, Y(D.resident), box.w, Y(0) - Y(D.resident));
    ctx.beginPath();
    ctx.moveTo(X(0), Y(D.resident));
    var level = D.resident;
    D.arena.forEach(function (p) {
      ctx.lineTo(X(p[0]), Y(level));
      level = D.resident + p[1];
      ctx.lineTo(X(p[0]), Y(level));
    });
    ctx.lineTo(X(T), Y(level));
    ctx.lineTo(X(T), Y(D.resident));
    ctx.closePath();
    ctx.fillStyle = 'rgba(78,121,167,0.45)';
    ctx.fill();
    ctx.strokeStyle = '#4e79a7';
    ctx.stroke();
    function hline(v, color, dash) {
      ctx.save();
      ctx.strokeStyle = color;
      ctx.lineWidth = 2;
      ctx.setLineDash(dash);
      ctx.beginPath(); ctx.moveTo(box.x, Y(v)); ctx.lineTo(box.x + box.w, Y(v));
      ctx.stroke();
      ctx.restore();
    }
    hline(D.budget, '#e15759', []);
    hline(D.lowerBound, '#555', [6, 4]);
    legend(document.getElementById('memory-legend'), [
      ['resident (weights, gradients, optimizer state)', 'rgba(89,161,79,0.5)'],
      ['arena in use', '#4e79a7'], ['budget', '#e15759'],
      ['lower bound', '#555']]);
    res['memory-points'] = D.arena.length;
    res['memory-ink'] = ink(c);
  }

  function drawTimeline(D, res) {
    var c = document.getElementById('timeline'), ctx = context(c);
    var box = {x: 90, y: 6, w: c.width - 110, h: c.height - 42};
    var T = D.roundSeconds > 0 ? D.roundSeconds : 1;
    var laneH = box.h / 3;
    var names = ['compute', 'copy-out', 'copy-in'];
    axes(ctx, box, T, 1, fmtTime, null, 'time within one round', true);
    ctx.textAlign = 'right';
    ctx.textBaseline = 'middle';
    ctx.fillStyle = '#333';
    names.forEach(function (n, i) {
      ctx.fillText(n, box.x - 6, box.y + (i + 0.5) * laneH);
    });
    function X(t) { return box.x + Math.min(t, T) / T * box.w; }
    var drawn = 0;
    D.slices.forEach(function (s) {
      /* A hairline gap keeps neighbouring slices apart. */
      var x0 = X(s[1]), w = Math.max(1, X(s[2]) - x0 - (X(s[2]) - x0 > 3 ? 1 : 0));
      ctx.fillStyle = COLORS[s[3]] || '#888';
      ctx.fillRect(x0, box.y + s[0] * laneH + 3, w, laneH - 6);
      drawn++;
    });
    var seen = {}, items = [];
    D.slices.forEach(function (s) {
      if (!seen[s[3]]) { seen[s[3]] = 1; items.push([s[3], COLORS[s[3]] || '#888']); }
    });
    legend(document.getElementById('timeline-legend'), items);
    var tip = document.getElementById('tip');
    c.addEventListener('mousemove', function (ev) {
      var r = c.getBoundingClientRect();
      var x = (ev.clientX - r.left) * c.width / r.width;
      var y = (ev.clientY - r.top) * c.height / r.height;
      var lane = Math.floor((y - box.y) / laneH), t = (x - box.x) / box.w * T;
      var hit = null;
      for (var i = 0; i < D.slices.length && !hit; i++) {
        var s = D.slices[i];
        if (s[0] === lane && s[1] <= t && t <= Math.max(s[2], s[1] + T / box.w))
          hit = s;
      }
      if (!hit) { tip.style.display = 'none'; return; }
      tip.textContent = hit[4] + ': ' + fmtTime(hit[1]) + ' to ' + fmtTime(hit[2]);
      tip.style.left = (ev.clientX + 12) + 'px';
      tip.style.top = (ev.clientY + 12) + 'px';
      tip.style.display = 'block';
    });
    c.addEventListener('mouseleave', function () { tip.style.display = 'none'; });
    res['timeline-slices'] = drawn;
    res['timeline-ink'] = ink(c);
  }

  function fillLayers(D, res) {
    var body = document.querySelector('#layers tbody');
    D.layers.forEach(function (l) {
      var tr = document.createElement('tr');
      cell(tr, l.node);
      cell(tr, l.op);
      cell(tr, fmtBytes(l.output), 'n');
      cell(tr, l.decision, '', l.why);
      cell(tr, l.algorithm || '-');
      cell(tr, fmtTime(l.forward), 'n');
      cell(tr, fmtTime(l.backward), 'n');
      cell(tr, l.stall > 0 ? fmtTime(l.stall) : '-', 'n');
      cell(tr, l.why, 'why');
      body.appendChild(tr);
    });
    var ul = document.getElementById('stalls');
    D.stalls.forEach(function (s) {
      var li = document.createElement('li');
      li.textContent = fmtTime(s.seconds) + ' before ' + s.task +
          (s.waitedFor ? ': waiting for ' + s.what + ' of ' + s.waitedFor : '');
      ul.appendChild(li);
    });
    if (!D.stalls.length) {
      var li = document.createElement('li');
      li.textContent = 'none: every copy is hidden behind compute';
      ul.appendChild(li);
    }
    res['layer-rows'] = body.rows.length;
    res['stall-items'] = D.stalls.length;
  }

  function drawCompare(D, res) {
    var c = document.getElementById('curve'), ctx = context(c);
    var box = {x: 70, y: 26, w: c.width - 90, h: c.height - 62};
    var xmax = 100, ymax = 0.1, points = 0, infeasible = 0;
    D.budgets.forEach(function (b) {
      xmax = Math.max(xmax, b.fraction_of_ideal_peak * 100);
    });
    D.cells.forEach(function (x) {
      if (x.feasible) ymax = Math.max(ymax, x.overhead);
    });
    xmax *= 1.05;
    ymax *= 1.1;
    axes(ctx, box, xmax, ymax * 100, function (v) { return v.toFixed(0) + '%'; },
         function (v) { return v.toFixed(0) + '%'; },
         'budget, % of the ideal peak');
    function X(f) { return box.x + f * 100 / xmax * box.w; }
    function Y(o) { return box.y + box.h - o / ymax * box.h; }
    ctx.fillStyle = '#b22';
    ctx.textAlign = 'left';
    ctx.textBaseline = 'middle';
    ctx.fillText('infeasible', box.x + 4, box.y - 14);
    var items = [];
    D.policies.forEach(function (p, pi) {
      var color = SERIES[pi % SERIES.length];
      items.push([p, color]);
      var pts = D.cells.filter(function (x) { return x.policy === p; })
          .map(function (x) {
            var b = D.budgets.filter(function (y) { return y.label === x.budget; })[0];
            return {f: b.fraction_of_ideal_peak, x: x};
          })
          .sort(function (a, b) { return a.f - b.f; });
      ctx.strokeStyle = color;
      ctx.fillStyle = color;
      ctx.lineWidth = 2;
      var open = false;
      ctx.beginPath();
      pts.forEach(function (q) {
        if (!q.x.feasible) { open = false; return; }
        if (open) ctx.lineTo(X(q.f), Y(q.x.overhead));
        else ctx.moveTo(X(q.f), Y(q.x.overhead));
        open = true;
      });
      ctx.stroke();
      pts.forEach(function (q) {
        if (q.x.feasible) {
          ctx.beginPath();
          ctx.arc(X(q.f), Y(q.x.overhead), 4, 0, 2 * Math.PI);
          ctx.fill();
          points++;
        } else {
          var x = X(q.f), y = box.y - 14 + (pi - D.policies.length / 2) * 3;
          ctx.beginPath();
          ctx.moveTo(x - 4, y - 4); ctx.lineTo(x + 4, y + 4);
          ctx.moveTo(x + 4, y - 4); ctx.lineTo(x - 4, y + 4);
          ctx.stroke();
          infeasible++;
        }
      });
    });
    legend(document.getElementById('curve-legend'), items);
    res['series'] = D.policies.length;
    res['points'] = points;
    res['infeasible'] = infeasible;
    res['chart-ink'] = ink(c);
  }

  function drawRun(D, res) {
    var c = document.getElementById('run'), ctx = context(c);
    var box = {x: 90, y: 12, w: c.width - 110, h: c.height - 48};
    var steps = 1, ymax = 0, norms = 0;
    D.run.forEach(function (p) {
      steps = Math.max(steps, p[0]);
      ymax = Math.max(ymax, p[1]);
      if (p[2] !== null) { ymax = Math.max(ymax, p[2]); norms++; }
    });
    var val = D.val || [];
    val.forEach(function (p) {
      steps = Math.max(steps, p[0]);
      ymax = Math.max(ymax, p[1]);
    });
    ymax = Math.max(ymax, 1e-9) * 1.08;
    axes(ctx, box, steps, ymax, function (v) { return v.toFixed(0); },
         function (v) { return v.toPrecision(3); }, 'optimizer step');
    function X(s) { return box.x + s / steps * box.w; }
    function Y(v) { return box.y + box.h - v / ymax * box.h; }
    function line(k, color, pts) {
      ctx.strokeStyle = color;
      ctx.lineWidth = 2;
      ctx.beginPath();
      var open = false;
      (pts || D.run).forEach(function (p) {
        if (p[k] === null) { open = false; return; }
        if (open) ctx.lineTo(X(p[0]), Y(p[k]));
        else ctx.moveTo(X(p[0]), Y(p[k]));
        open = true;
      });
      ctx.stroke();
    }
    line(1, SERIES[0]);
    var items = [['training loss', SERIES[0]]];
    if (norms > 0) {
      line(2, SERIES[1]);
      items.push(['gradient norm before clipping', SERIES[1]]);
    }
    if (val.length > 0) {
      line(1, SERIES[2], val);
      items.push(['validation loss', SERIES[2]]);
    }
    legend(document.getElementById('run-legend'), items);
    res['run-points'] = D.run.length;
    res['val-points'] = val.length;
    res['run-ink'] = ink(c);
  }

  var body = document.body;
  try {
    var D = JSON.parse(document.getElementById('memfit-data').textContent);
    var res = {};
    if (D.kind === 'compare') {
      drawCompare(D.data, res);
    } else {
      drawMemory(D, res);
      drawTimeline(D, res);
      fillLayers(D, res);
      if (D.run) drawRun(D, res);
    }
    Object.keys(res).forEach(function (k) {
      body.setAttribute('data-' + k, String(res[k]));
    });
    body.setAttribute('data-drawn', 'yes');
  } catch (e) {
    body.setAttribute('data-drawn', 'error: ' + e);
  }
})();
)js";
}

} // namespace memfit
