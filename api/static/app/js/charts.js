// Inline SVG charts: horizontal stacked bars and a latency-against-SLO chart. Every
// mark has a <title> (its value on hover, read by screen readers); colours per GPU
// type are the reports' (GET /web/config).

import { h, s } from "./dom.js";

const ROW = 26;
const LABEL_W = 190;
const VALUE_W = 170;

/**
 * Horizontal stacked bars.
 * rows: [{label, segments: [{value, color, title}], note?}]; fmt formats a total.
 * opts: {title, width, baseline (a value to draw a dashed line at), legend: [[name, color]]}
 */
export function stackedBars(rows, fmt, opts = {}) {
  const width = opts.width || 720;
  const plotW = width - LABEL_W - VALUE_W;
  const totals = rows.map((r) => r.segments.reduce((a, g) => a + Math.max(0, g.value || 0), 0));
  const max = Math.max(1e-9, ...totals, opts.baseline || 0);
  const height = rows.length * ROW + 24;
  const marks = [];
  rows.forEach((r, i) => {
    const y = i * ROW + 4;
    marks.push(s("text", { x: LABEL_W - 8, y: y + ROW / 2 + 4, "text-anchor": "end", class: "lbl" }, clip(r.label, 28)));
    let x = LABEL_W;
    for (const g of r.segments) {
      const w = (Math.max(0, g.value || 0) / max) * plotW;
      if (w <= 0) continue;
      marks.push(s("rect", { x, y: y + 3, width: Math.max(w, 1), height: ROW - 8, fill: g.color, rx: 2 }, s("title", {}, g.title)));
      x += w;
    }
    marks.push(s("text", { x: x + 6, y: y + ROW / 2 + 4, class: "val" }, r.note || fmt(totals[i])));
  });
  if (opts.baseline) {
    const bx = LABEL_W + (opts.baseline / max) * plotW;
    marks.push(
      s("line", { x1: bx, x2: bx, y1: 0, y2: height - 18, class: "baseline" }, s("title", {}, `base: ${fmt(opts.baseline)}`)),
    );
  }
  marks.push(s("line", { x1: LABEL_W, x2: LABEL_W, y1: 0, y2: height - 18, class: "axis" }));
  const svg = s(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, width, role: "img", "aria-label": opts.title || "chart", class: "chart" },
    s("title", {}, opts.title || "chart"),
    marks,
  );
  return h("figure", { class: "chart-fig" }, svg, opts.legend ? legend(opts.legend) : null);
}

/** A legend of [name, colour] pairs. */
export function legend(items) {
  return h(
    "figcaption",
    { class: "legend" },
    items.map(([name, color]) => {
      const sw = h("span", { class: "swatch", "aria-hidden": "true" });
      sw.style.background = color;
      return h("span", { class: "legend-item" }, sw, name);
    }),
  );
}

/**
 * Latency as a share of the SLO, per class: predicted and simulated TTFT and TPOT.
 * rows: [{label, items: [{name, value, slo, kind}]}] (kind: predicted | simulated)
 */
export function sloChart(rows, opts = {}) {
  const width = opts.width || 720;
  const plotW = width - LABEL_W - VALUE_W;
  const bars = rows.flatMap((r) => r.items.map((it) => ({ ...it, label: r.label })));
  const max = Math.max(1.2, ...bars.map((b) => (b.slo ? b.value / b.slo : 0)));
  const BAR = 14;
  const height = bars.length * (BAR + 6) + rows.length * 8 + 28;
  const marks = [];
  let y = 4;
  for (const r of rows) {
    for (const it of r.items) {
      const ratio = it.slo ? it.value / it.slo : 0;
      const w = (ratio / max) * plotW;
      const over = ratio > 1;
      marks.push(s("text", { x: LABEL_W - 8, y: y + BAR - 3, "text-anchor": "end", class: "lbl" }, `${clip(r.label, 14)} · ${it.name}`));
      marks.push(
        s(
          "rect",
          { x: LABEL_W, y, width: Math.max(w, 1), height: BAR, rx: 2, class: `bar ${it.kind} ${over ? "over" : ""}` },
          s("title", {}, `${r.label} ${it.name} (${it.kind}): ${fmtMs(it.value)} against an SLO of ${fmtMs(it.slo)} (${Math.round(ratio * 100)}%)`),
        ),
      );
      marks.push(s("text", { x: LABEL_W + w + 6, y: y + BAR - 3, class: "val" }, `${fmtMs(it.value)} / ${fmtMs(it.slo)}`));
      y += BAR + 6;
    }
    y += 8;
  }
  const sx = LABEL_W + plotW / max;
  marks.push(s("line", { x1: sx, x2: sx, y1: 0, y2: y, class: "slo-line" }, s("title", {}, "the SLO")));
  marks.push(s("text", { x: sx, y: y + 14, "text-anchor": "middle", class: "lbl" }, "SLO"));
  marks.push(s("line", { x1: LABEL_W, x2: LABEL_W, y1: 0, y2: y, class: "axis" }));
  const svg = s(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, width, role: "img", "aria-label": opts.title || "latency against SLO", class: "chart" },
    s("title", {}, opts.title || "latency against SLO"),
    marks,
  );
  return h(
    "figure",
    { class: "chart-fig" },
    svg,
    h(
      "figcaption",
      { class: "legend" },
      h("span", { class: "legend-item" }, h("span", { class: "swatch predicted", "aria-hidden": "true" }), "predicted"),
      h("span", { class: "legend-item" }, h("span", { class: "swatch simulated", "aria-hidden": "true" }), "simulated"),
      h("span", { class: "legend-item" }, h("span", { class: "swatch over", "aria-hidden": "true" }), "over the SLO"),
    ),
  );
}

/** A range bar: low to high with a marker at ``mid`` (the cost band). */
export function bandBar(low, mid, high, fmt, title) {
  const width = 360;
  const max = Math.max(high, mid) * 1.05 || 1;
  const x = (v) => 10 + (v / max) * (width - 20);
  return s(
    "svg",
    { viewBox: `0 0 ${width} 34`, width: "100%", role: "img", "aria-label": title, class: "chart band" },
    s("title", {}, title),
    s("line", { x1: x(0), x2: x(max), y1: 16, y2: 16, class: "axis" }),
    s("rect", { x: x(low), y: 9, width: Math.max(2, x(high) - x(low)), height: 14, rx: 3, class: "band-range" }, s("title", {}, `90% band: ${fmt(low)} to ${fmt(high)}`)),
    s("line", { x1: x(mid), x2: x(mid), y1: 4, y2: 28, class: "band-mid" }, s("title", {}, `planned: ${fmt(mid)}`)),
  );
}

function fmtMs(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  return x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${Math.round(x)} ms`;
}

function clip(text, n) {
  const t = String(text);
  return t.length > n ? `${t.slice(0, n - 1)}…` : t;
}
