// src/report/html_assets.cpp -- the report page's stylesheet and script, inlined into every page
//
// Our own few lines, no library: the script only hides and dims by process and changes the time
// range of the timelines' plot areas (their SVG viewBox), redrawing the time labels. The page
// reads fine without it. It also notes where each chart landed (data-box) and that it ran
// (data-ready), which the headless-browser test reads back.
#include "vramscope/report/html_report.hpp"

namespace vramscope::report {

const char* html_report_style() {
  return R"CSS(
body{font:14px/1.4 system-ui,sans-serif;margin:16px 24px;color:#222;background:#fff}
h1{font-size:22px;margin:0 0 8px}h2{font-size:18px;margin:24px 0 6px}h3{font-size:16px;margin:20px 0 2px}
h4{font-size:14px;margin:12px 0 4px;font-weight:600}
dl{display:grid;grid-template-columns:max-content 1fr;gap:2px 12px;margin:0}dt{color:#666}dd{margin:0}
nav.controls{position:sticky;top:0;background:#f6f6f6;padding:8px;border:1px solid #ddd;margin:12px 0;z-index:1}
table{border-collapse:collapse;margin:6px 0}td,th{border:1px solid #ddd;padding:3px 8px;text-align:right}
th{background:#f3f3f3}td.cmd{text-align:left;max-width:480px;overflow-wrap:anywhere}
p.cmd{font-family:monospace;color:#555;margin:0;overflow-wrap:anywhere}p.note{color:#666;margin:2px 0}
.legend{display:flex;flex-wrap:wrap;gap:4px 14px;margin:4px 0}
.legend i{display:inline-block;width:12px;height:12px;margin-right:4px;vertical-align:-1px}
svg.chart{display:block;max-width:100%;height:auto;user-select:none}
svg.timeline .plot{cursor:crosshair}
.grid{stroke:#e6e6e6}.tick{stroke:#888}.frame{fill:none;stroke:#999}.plotbg{fill:#fff}
.ylabel{font-size:11px;text-anchor:end;fill:#555}.xlabel{font-size:11px;text-anchor:middle;fill:#555}
path.layer{opacity:.85}path.layer.dim{opacity:.15}.selection{fill:rgba(80,120,200,.2)}
)CSS";
}

const char* html_report_script() {
  return R"JS(
(function () {
  'use strict';
  var svgNs = 'http://www.w3.org/2000/svg';
  var timelines = Array.prototype.slice.call(document.querySelectorAll('svg.timeline'));
  var select = document.getElementById('proc-select');
  var label = document.getElementById('zoom-label');

  function showProcess(value) {
    document.querySelectorAll('section.proc').forEach(function (s) {
      s.hidden = value !== 'all' && s.getAttribute('data-proc') !== value;
    });
    document.querySelectorAll('path.layer').forEach(function (p) {
      p.classList.toggle('dim', value !== 'all' && p.getAttribute('data-proc') !== value);
    });
  }
  select.addEventListener('change', function () { showProcess(select.value); });

  function pad2(n) { return (n < 10 ? '0' : '') + n; }
  function duration(ns) {
    var s = ns / 1e9;
    if (s < 1) return Math.round(s * 1000) + ' ms';
    if (s < 60) return Math.round(s * 10) / 10 + ' s';
    var m = Math.floor(s / 60);
    if (m < 60) return m + 'm' + pad2(Math.floor(s % 60)) + 's';
    return Math.floor(m / 60) + 'h' + pad2(m % 60) + 'm';
  }
  function niceStep(span) {
    if (span <= 0) return 1;
    var raw = span / 6, power = Math.pow(10, Math.floor(Math.log10(raw)));
    var m = [1, 2, 5, 10].find(function (x) { return x * power >= raw; });
    return m * power;
  }
  function element(name, attributes, text) {
    var e = document.createElementNS(svgNs, name);
    Object.keys(attributes).forEach(function (k) { e.setAttribute(k, attributes[k]); });
    if (text) e.textContent = text;
    return e;
  }

  // Shows bins [b0, b1) of every timeline and relabels their time axes.
  function zoomTo(b0, b1) {
    timelines.forEach(function (svg) {
      var plot = svg.querySelector('svg.plot');
      var bins = +svg.getAttribute('data-bins'), span = +svg.getAttribute('data-x-span');
      var height = plot.viewBox.baseVal.height, width = +plot.getAttribute('width');
      plot.setAttribute('viewBox', b0 + ' 0 ' + (b1 - b0) + ' ' + height);
      var t0 = b0 / bins * span, t1 = b1 / bins * span, step = niceStep((t1 - t0) / 1e9) * 1e9;
      var axis = svg.querySelector('g.xaxis');
      while (axis.firstChild) axis.removeChild(axis.firstChild);
      for (var t = Math.ceil(t0 / step) * step; t <= t1 + 1; t += step) {
        var x = ((t - t0) / (t1 - t0) * width).toFixed(1);
        axis.appendChild(element('line', {x1: x, x2: x, y1: 0, y2: 4, 'class': 'tick'}));
        axis.appendChild(element('text', {x: x, y: 17, 'class': 'xlabel'}, duration(t)));
      }
    });
    var first = timelines[0];
    if (first) {
      var bins = +first.getAttribute('data-bins'), span = +first.getAttribute('data-x-span');
      label.textContent = b0 === 0 && b1 === bins ? 'Drag across a timeline to zoom in on time.'
          : 'Showing +' + duration(b0 / bins * span) + ' .. +' + duration(b1 / bins * span);
    }
  }
  function binAt(plot, event) {
    var r = plot.getBoundingClientRect(), vb = plot.viewBox.baseVal;
    var f = Math.min(Math.max((event.clientX - r.left) / r.width, 0), 1);
    return vb.x + f * vb.width;
  }
  timelines.forEach(function (svg) {
    var plot = svg.querySelector('svg.plot'), start = null, band = null;
    plot.addEventListener('mousedown', function (e) {
      start = binAt(plot, e);
      band = element('rect', {x: start, y: 0, width: 0, height: plot.viewBox.baseVal.height, 'class': 'selection'});
      plot.appendChild(band);
      e.preventDefault();
    });
    plot.addEventListener('mousemove', function (e) {
      if (start === null) return;
      var b = binAt(plot, e);
      band.setAttribute('x', Math.min(start, b));
      band.setAttribute('width', Math.abs(b - start));
    });
    window.addEventListener('mouseup', function (e) {
      if (start === null) return;
      var b = binAt(plot, e), lo = Math.min(start, b), hi = Math.max(start, b);
      plot.removeChild(band);
      start = null;
      if (hi - lo >= 0.5) zoomTo(lo, hi);
    });
  });
  document.getElementById('zoom-reset').addEventListener('click', function () {
    if (timelines[0]) zoomTo(0, +timelines[0].getAttribute('data-bins'));
  });

  document.querySelectorAll('svg.chart').forEach(function (svg) {
    var r = (svg.querySelector('svg.plot') || svg).getBoundingClientRect();
    svg.setAttribute('data-box', [r.left + window.scrollX, r.top + window.scrollY, r.width, r.height]
        .map(Math.round).join(','));
  });
  document.documentElement.setAttribute('data-ready', window.vramscopeErrors.length ? 'errors' : 'yes');
})();
)JS";
}

}  // namespace vramscope::report
