// Small DOM and formatting helpers shared by every view (no framework).

/** Create an element: h("div", {class: "x", onclick: fn}, child, "text", [more]). */
export function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "class") {
      el.className = value;
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "value") {
      el.value = value;
    } else if (key === "checked") {
      el.checked = Boolean(value);
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === undefined || child === null || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
}

/** Replace an element's children. */
export function mount(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

const SVG_NS = "http://www.w3.org/2000/svg";

/** Create an SVG element with attributes and children. */
export function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG_NS, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value !== undefined && value !== null) el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

let uid = 0;
/** A unique id for label/input pairs. */
export function nextId(prefix = "f") {
  uid += 1;
  return `${prefix}-${uid}`;
}

export function usd(x, digits = 0) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  if (Math.abs(x) >= 1e6) return `$${(x / 1e6).toLocaleString("en-US", { maximumFractionDigits: 2 })}M`;
  return `$${x.toLocaleString("en-US", { minimumFractionDigits: digits, maximumFractionDigits: digits })}`;
}

export function num(x, digits = 0) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  return x.toLocaleString("en-US", { maximumFractionDigits: digits });
}

export function pct(x, digits = 0) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  return `${(100 * x).toFixed(digits)}%`;
}

export function ms(x) {
  if (x === null || x === undefined || !Number.isFinite(x)) return "–";
  return x >= 1000 ? `${(x / 1000).toFixed(2)} s` : `${x.toFixed(x < 10 ? 1 : 0)} ms`;
}

export function when(iso) {
  if (!iso) return "–";
  const d = new Date(iso);
  return Number.isNaN(d.getTime()) ? iso : d.toISOString().replace("T", " ").slice(0, 19) + " UTC";
}

/** A swatch and the GPU id, in the GPU's colour. */
export function gpuChip(gpu, colors) {
  const sw = h("span", { class: "swatch", "aria-hidden": "true" });
  sw.style.background = (colors && colors[gpu]) || "#888";
  return h("span", { class: "gpu-chip" }, sw, gpu);
}

/** A table from column specs [{label, get(row) -> node|text, num?}] and rows. */
export function table(columns, rows, attrs = {}) {
  return h(
    "div",
    { class: "table-wrap" },
    h(
      "table",
      attrs,
      h("thead", {}, h("tr", {}, columns.map((c) => h("th", { scope: "col", class: c.num ? "num" : "" }, c.label)))),
      h(
        "tbody",
        {},
        rows.map((row) => h("tr", {}, columns.map((c) => h("td", { class: c.num ? "num" : "" }, c.get(row))))),
      ),
    ),
  );
}

/** A visible, announced message (kind: info, error, ok). */
export function notice(kind, ...children) {
  return h("div", { class: `notice ${kind}`, role: kind === "error" ? "alert" : "status" }, ...children);
}

/** Deep copy of a JSON value. */
export function clone(x) {
  return x === undefined ? undefined : JSON.parse(JSON.stringify(x));
}
