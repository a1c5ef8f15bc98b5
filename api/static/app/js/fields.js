// Form fields bound to a JSON document by field path, and the API's field-level
// errors shown next to the field they name.
//
// Every field is wrapped in an element with ``data-path`` (the API's field path,
// "traffic.classes[1].prefix_hit_rate") holding a ``.field-error`` slot; an issue
// whose path names no field goes to the nearest enclosing one (its path with the
// last segment dropped), else to the form's summary.

import { h, nextId } from "./dom.js";
import { getPath, setPath } from "./state.js";

/** A labelled input bound to ``path`` of ``bind.doc``; ``bind.changed()`` after edits.
 * kind: "number" | "text" | "select" | "checkbox". */
export function field(bind, path, label, opts = {}) {
  const id = nextId("in");
  const errId = `${id}-err`;
  const kind = opts.kind || "number";
  let input;
  if (kind === "select") {
    input = h(
      "select",
      { id, "aria-describedby": errId },
      opts.blank !== undefined ? h("option", { value: "" }, opts.blank) : null,
      (opts.options || []).map(([value, text]) => h("option", { value }, text)),
    );
  } else if (kind === "checkbox") {
    input = h("input", { id, type: "checkbox", "aria-describedby": errId });
  } else {
    input = h("input", {
      id,
      type: kind === "number" ? "number" : "text",
      step: kind === "number" ? opts.step || "any" : undefined,
      min: opts.min,
      max: opts.max,
      inputmode: kind === "number" ? "decimal" : undefined,
      placeholder: opts.placeholder,
      "aria-describedby": errId,
    });
  }
  input.dataset.bind = path;
  input.dataset.kind = kind;
  if (opts.format) formats.set(input, opts.format);
  const read = () => {
    if (kind === "checkbox") return input.checked ? true : opts.uncheckedValue;
    const raw = input.value.trim();
    if (raw === "") return undefined;
    if (opts.parse) return opts.parse(raw);
    if (kind === "number") {
      const n = Number(raw);
      return Number.isFinite(n) ? n : raw; // the API names what is wrong with "abc"
    }
    return raw;
  };
  input.addEventListener(kind === "checkbox" || kind === "select" ? "change" : "input", () => {
    if (kind === "number" && input.validity.badInput) return;
    setPath(bind.doc, path, read());
    bind.changed(path);
  });
  const hint = opts.hint ? h("span", { class: "hint" }, opts.hint) : null;
  const labelEl = h("label", { for: id }, label, hint);
  const wrap = h(
    "div",
    { class: `field ${kind === "checkbox" ? "check" : ""} ${opts.wide ? "wide" : ""}`, dataset: { path } },
    kind === "checkbox" ? [input, labelEl] : [labelEl, input],
    h("p", { class: "field-error", id: errId, "aria-live": "polite" }),
  );
  writeInput(input, getPath(bind.doc, path));
  return wrap;
}

/** A group of checkboxes setting ``path`` to the list of checked values (none: unset). */
export function checkList(bind, path, legend, options, opts = {}) {
  const errId = nextId("err");
  const boxes = options.map(([value, text, decorate]) => {
    const id = nextId("cb");
    const box = h("input", { id, type: "checkbox", value, "aria-describedby": errId });
    box.addEventListener("change", () => {
      const chosen = [...wrap.querySelectorAll("input[type=checkbox]")].filter((b) => b.checked).map((b) => b.value);
      setPath(bind.doc, path, chosen.length ? chosen : undefined);
      bind.changed(path);
    });
    return h("label", { class: "check-item", for: id }, box, decorate || null, text);
  });
  const wrap = h(
    "fieldset",
    { class: `field checklist ${opts.wide ? "wide" : ""}`, dataset: { path, bindList: path } },
    h("legend", {}, legend, opts.hint ? h("span", { class: "hint" }, opts.hint) : null),
    h("div", { class: "check-items" }, boxes),
    h("p", { class: "field-error", id: errId, "aria-live": "polite" }),
  );
  syncList(wrap, getPath(bind.doc, path));
  return wrap;
}

function syncList(wrap, value) {
  const chosen = new Set(Array.isArray(value) ? value.map(String) : []);
  for (const b of wrap.querySelectorAll("input[type=checkbox]")) b.checked = chosen.has(b.value);
}

/** Inputs whose value is shown through a format function (a boolean in a select). */
const formats = new WeakMap();

function writeInput(input, value) {
  if (formats.has(input)) input.value = formats.get(input)(value);
  else if (input.dataset.kind === "checkbox") input.checked = value === true;
  else input.value = value === undefined || value === null ? "" : String(value);
}

/** Set every bound input inside ``root`` from ``doc`` (except the one being typed in). */
export function syncInputs(root, doc) {
  for (const input of root.querySelectorAll("[data-bind]")) {
    if (input === document.activeElement) continue;
    writeInput(input, getPath(doc, input.dataset.bind));
  }
  for (const wrap of root.querySelectorAll("[data-bind-list]")) syncList(wrap, getPath(doc, wrap.dataset.bindList));
}

/** Parent of a field path: "a.b[2].c" -> "a.b[2]" -> "a.b" -> "a" -> "". */
export function parentPath(path) {
  if (path.endsWith("]")) return path.slice(0, path.lastIndexOf("["));
  const dot = path.lastIndexOf(".");
  return dot < 0 ? "" : path.slice(0, dot);
}

/** Remove every shown field error inside ``root``. */
export function clearErrors(root) {
  for (const p of root.querySelectorAll(".field-error")) p.textContent = "";
  for (const w of root.querySelectorAll(".has-error")) w.classList.remove("has-error");
  for (const i of root.querySelectorAll("[aria-invalid]")) i.removeAttribute("aria-invalid");
}

/** Show each issue next to its field (or the nearest enclosing one); return the
 * issues that found no field. The first field in error gets the focus if ``focus``. */
export function showErrors(root, issues, focus = false) {
  const unplaced = [];
  let first = null;
  for (const issue of issues) {
    let path = issue.field || "";
    let wrap = null;
    while (path) {
      wrap = root.querySelector(`[data-path="${CSS.escape(path)}"]`);
      if (wrap) break;
      path = parentPath(path);
    }
    if (!wrap) {
      unplaced.push(issue);
      continue;
    }
    const slot = wrap.querySelector(":scope > .field-error");
    const text = path === issue.field ? issue.message : `${issue.field}: ${issue.message}`;
    slot.textContent = slot.textContent ? `${slot.textContent} ${text}` : text;
    wrap.classList.add("has-error");
    const input = wrap.querySelector(":scope > input, :scope > select, :scope > textarea");
    if (input) input.setAttribute("aria-invalid", "true");
    if (!first) first = input || wrap;
  }
  if (focus && first) {
    first.scrollIntoView({ block: "center" });
    if (first.focus) first.focus({ preventScroll: true });
  }
  return unplaced;
}
