// What-if comparisons: build variants of a base request (mix, rate scale, SLOs, GPU
// sets, prefix hits, a share sweep), start them (POST /comparisons), follow the
// progress (GET /comparisons/{id}, polled) and read the table, charts and exports.

import { ApiError, get, post } from "./api.js";
import { stackedBars } from "./charts.js";
import { clone, gpuChip, h, mount, ms, notice, num, table, usd, when } from "./dom.js";
import { clearErrors, showErrors } from "./fields.js";
import { go, store } from "./state.js";

const POLL_MS = 1000;

function className(c) {
  return c.name || c.workload;
}

function round6(x) {
  return Math.round(x * 1e6) / 1e6;
}

/** The mix that gives class ``name`` share ``s`` and scales the others to fill the rest. */
export function mixFor(classes, name, s) {
  const own = classes.find((c) => className(c) === name);
  const rest = 1 - (own ? own.share : 0);
  const mix = {};
  const others = classes.filter((c) => className(c) !== name);
  for (const c of others) mix[className(c)] = round6(rest > 0 ? (c.share / rest) * (1 - s) : (1 - s) / others.length);
  mix[name] = round6(1 - Object.values(mix).reduce((a, b) => a + b, 0));
  return mix;
}

function emptySpec(base) {
  return { name: `what-if: ${base.name || base.model || "plan"}`, base: clone(base), variants: [], sweeps: [] };
}

export async function renderCompare(el) {
  if (!store.compareDraft) {
    const base = store.compareBase || store.draft;
    if (base) store.compareDraft = emptySpec(base);
  }
  const examples = (await get("/examples")).filter((x) => x.kind === "comparison");
  const host = h("div");
  const status = h("div", { class: "submit-status", role: "status", "aria-live": "polite" });
  const errors = h("div", { "aria-live": "assertive" });

  const exampleSel = h(
    "select",
    {
      id: "cmp-example",
      onchange: async () => {
        if (!exampleSel.value) return;
        const ex = await get(`/examples/${encodeURIComponent(exampleSel.value)}`);
        store.compareDraft = ex.document;
        draw();
      },
    },
    h("option", { value: "" }, "Choose a shipped what-if…"),
    examples.map((x) => h("option", { value: x.name }, `${x.name} — ${x.title}`)),
  );

  function draw() {
    const spec = store.compareDraft;
    if (!spec) {
      mount(
        host,
        notice(
          "info",
          "A what-if starts from a base request: open a plan and press “What-if from this plan”, ",
          h("a", { href: "#/plan" }, "compose one"),
          ", or load a shipped what-if above.",
        ),
      );
      return;
    }
    mount(host, builder(spec, draw));
  }

  const start = h("button", { type: "button", class: "primary", "data-testid": "start-comparison" }, "Start the comparison");
  start.addEventListener("click", async () => {
    const spec = store.compareDraft;
    if (!spec) return;
    start.disabled = true;
    clearErrors(host);
    mount(errors);
    mount(status, h("span", { class: "spinner", "aria-hidden": "true" }), " Validating every variant and queueing them…");
    try {
      const created = await post("/comparisons", spec);
      mount(status);
      go(`#/comparisons/${created.id}`);
    } catch (err) {
      mount(status);
      if (err instanceof ApiError && err.status === 422) {
        showErrors(host, err.issues, true);
        mount(errors, notice("error", h("strong", {}, "The API refused the comparison: "), h("ul", {}, err.issues.map((i) => h("li", {}, h("code", {}, i.field), " ", i.message)))));
      } else {
        mount(errors, notice("error", err.status === 401 ? "Enter the API key at the top right. " : "", err.message));
      }
    } finally {
      start.disabled = false;
    }
  });

  mount(
    el,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "What-ifs"),
      h("div", { class: "field inline" }, h("label", { for: "cmp-example" }, "Load a what-if"), exampleSel),
    ),
    store.compareFrom ? h("p", { class: "muted" }, "Base: the request of ", h("a", { href: `#/plans/${store.compareFrom}` }, "this plan"), ".") : null,
    errors,
    host,
    h("div", { class: "actions sticky" }, start, status),
  );
  draw();
}

function builder(spec, redraw) {
  const base = spec.base || {};
  const classes = (base.traffic && base.traffic.classes) || [];
  const names = classes.map(className);
  const variants = spec.variants || (spec.variants = []);
  const sweeps = spec.sweeps || (spec.sweeps = []);
  const add = (v) => {
    const taken = new Set(variants.map((x) => x.name));
    let name = v.name;
    for (let k = 2; taken.has(name); k++) name = `${v.name} (${k})`;
    variants.push({ ...v, name });
    redraw();
  };

  // mix: one class's share
  const mixClass = h("select", { id: "mix-class" }, names.map((n) => h("option", { value: n }, n)));
  const mixValue = h("input", { id: "mix-share", type: "range", min: 0, max: 1, step: 0.05, value: 0.5 });
  const mixOut = h("output", { for: "mix-share" }, "50%");
  mixValue.addEventListener("input", () => {
    mixOut.textContent = `${Math.round(mixValue.value * 100)}%`;
  });
  const rateScale = h("input", { id: "rate-scale", type: "number", step: "any", min: 0, value: 1.5 });
  const sloTtft = h("input", { id: "slo-ttft", type: "number", step: "any", min: 0, placeholder: "unchanged" });
  const sloTpot = h("input", { id: "slo-tpot", type: "number", step: "any", min: 0, placeholder: "unchanged" });
  const gpuBoxes = store.catalog.gpus.map((g) => {
    const box = h("input", { type: "checkbox", value: g.id, id: `vg-${g.id}` });
    return h("label", { class: "check-item", for: `vg-${g.id}` }, box, gpuChip(g.id, store.config.gpu_colors));
  });
  const hitClass = h("select", { id: "hit-class" }, names.map((n) => h("option", { value: n }, n)));
  const hitValue = h("input", { id: "hit-value", type: "number", step: "any", min: 0, max: 0.99, value: 0 });
  const sweepClass = h("select", { id: "sweep-class" }, names.map((n) => h("option", { value: n }, n)));
  const sweepValues = h("input", { id: "sweep-values", type: "text", value: "0, 0.25, 0.5, 0.75, 1" });

  const json = h("textarea", { id: "cmp-json", class: "json", rows: 16, spellcheck: "false", "aria-describedby": "cmp-json-err" });
  json.value = JSON.stringify(spec, null, 2);
  const jsonErr = h("p", { class: "field-error", id: "cmp-json-err" });
  json.addEventListener("change", () => {
    try {
      const parsed = JSON.parse(json.value);
      if (!parsed || typeof parsed !== "object" || Array.isArray(parsed)) throw new Error("a comparison is a JSON object");
      store.compareDraft = parsed;
      redraw();
    } catch (err) {
      jsonErr.textContent = `Not applied: ${err.message}`;
    }
  });

  const variantRows = variants.map((v, i) =>
    h(
      "li",
      { dataset: { path: `variants.${i}` } },
      h("strong", {}, v.name),
      " ",
      h("code", {}, describe(v)),
      " ",
      h("button", { type: "button", class: "small ghost", "aria-label": `Remove variant ${v.name}`, onclick: () => { variants.splice(i, 1); redraw(); } }, "Remove"),
      h("p", { class: "field-error" }),
    ),
  );
  const sweepRows = sweeps.map((sw, i) =>
    h(
      "li",
      { dataset: { path: `sweeps.${i}` } },
      h("strong", {}, sw.name),
      ` ${sw.share_of ? `share of ${sw.share_of}` : sw.path}: ${sw.values.join(", ")} `,
      h("button", { type: "button", class: "small ghost", "aria-label": `Remove sweep ${sw.name}`, onclick: () => { sweeps.splice(i, 1); redraw(); } }, "Remove"),
      h("p", { class: "field-error" }),
    ),
  );
  const count = 1 + variants.length + sweeps.reduce((a, sw) => a + sw.values.length, 0);

  return h(
    "div",
    { class: "composer-grid" },
    h(
      "div",
      {},
      h(
        "section",
        { class: "card", "aria-labelledby": "base-h", dataset: { path: "base" } },
        h("h2", { id: "base-h" }, "Base"),
        h("p", {}, `${base.name || "(unnamed)"} · ${base.model} · ${num(base.traffic && base.traffic.rate_rps)} req/s · `, classes.map((c) => `${className(c)} ${Math.round(c.share * 100)}%`).join(", ")),
        store.draft
          ? h(
              "button",
              {
                type: "button",
                class: "small",
                onclick: () => {
                  spec.base = clone(store.draft);
                  store.compareFrom = null;
                  redraw();
                },
              },
              "Use the request in the Plan tab as the base",
            )
          : null,
        h("p", { class: "field-error" }),
      ),
      h(
        "section",
        { class: "card", "aria-labelledby": "var-h" },
        h("h2", { id: "var-h" }, "Add variants"),
        names.length > 1
          ? h(
              "div",
              { class: "variant-row" },
              h("label", { for: "mix-class" }, "Mix: share of"),
              mixClass,
              h("label", { for: "mix-share", class: "sr-only" }, "Share"),
              mixValue,
              mixOut,
              h("button", { type: "button", class: "small", onclick: () => add({ name: `${mixClass.value} ${Math.round(mixValue.value * 100)}%`, mix: mixFor(classes, mixClass.value, Number(mixValue.value)) }) }, "Add"),
            )
          : null,
        h(
          "div",
          { class: "variant-row" },
          h("label", { for: "rate-scale" }, "Traffic ×"),
          rateScale,
          h("button", { type: "button", class: "small", onclick: () => add({ name: `traffic x${rateScale.value}`, rate_scale: Number(rateScale.value) }) }, "Add"),
        ),
        h(
          "div",
          { class: "variant-row" },
          h("label", { for: "slo-ttft" }, "SLO: TTFT ms"),
          sloTtft,
          h("label", { for: "slo-tpot" }, "TPOT ms"),
          sloTpot,
          h(
            "button",
            {
              type: "button",
              class: "small",
              onclick: () => {
                const slo = {};
                if (sloTtft.value) slo.ttft_ms = Number(sloTtft.value);
                if (sloTpot.value) slo.tpot_ms = Number(sloTpot.value);
                if (!Object.keys(slo).length) return;
                add({ name: `SLO ${slo.ttft_ms ? `TTFT ${slo.ttft_ms} ms ` : ""}${slo.tpot_ms ? `TPOT ${slo.tpot_ms} ms` : ""}`.trim(), override: { slo } });
              },
            },
            "Add",
          ),
        ),
        h(
          "fieldset",
          { class: "variant-row gpu-set" },
          h("legend", {}, "GPU set"),
          h("div", { class: "check-items" }, gpuBoxes),
          h(
            "button",
            {
              type: "button",
              class: "small",
              onclick: () => {
                const chosen = gpuBoxes.map((l) => l.querySelector("input")).filter((b) => b.checked).map((b) => b.value);
                if (chosen.length) add({ name: `GPUs: ${chosen.join(", ")}`, override: { candidates: { gpus: chosen } } });
              },
            },
            "Add",
          ),
        ),
        h(
          "div",
          { class: "variant-row" },
          h("label", { for: "hit-class" }, "Prefix hits of"),
          hitClass,
          h("label", { for: "hit-value" }, "="),
          hitValue,
          h("button", { type: "button", class: "small", onclick: () => add({ name: `${hitClass.value} prefix hits ${hitValue.value}`, class_overrides: { [hitClass.value]: { prefix_hit_rate: Number(hitValue.value) } } }) }, "Add"),
        ),
        names.length > 1
          ? h(
              "div",
              { class: "variant-row" },
              h("label", { for: "sweep-class" }, "Sweep the share of"),
              sweepClass,
              h("label", { for: "sweep-values" }, "over"),
              sweepValues,
              h(
                "button",
                {
                  type: "button",
                  class: "small",
                  onclick: () => {
                    const values = sweepValues.value.split(",").map((x) => Number(x.trim())).filter((x) => Number.isFinite(x));
                    if (values.length) {
                      sweeps.push({ name: `${sweepClass.value} share`, share_of: sweepClass.value, values });
                      redraw();
                    }
                  },
                },
                "Add sweep",
              ),
            )
          : null,
      ),
      h(
        "section",
        { class: "card", "aria-labelledby": "list-h", dataset: { path: "variants" } },
        h("h2", { id: "list-h" }, `Variants (${count} plans with the base)`),
        variantRows.length || sweepRows.length ? h("ul", { class: "variant-list" }, variantRows, sweepRows) : h("p", { class: "empty" }, "No variant yet: add one above."),
        h("p", { class: "field-error" }),
      ),
    ),
    h(
      "section",
      { class: "json-panel", "aria-labelledby": "cmp-json-h" },
      h("h2", { id: "cmp-json-h" }, "Comparison (JSON)"),
      h("label", { for: "cmp-json", class: "sr-only" }, "Comparison document as JSON"),
      json,
      jsonErr,
    ),
  );
}

function describe(v) {
  const parts = [];
  if (v.mix) parts.push(`mix ${Object.entries(v.mix).map(([k, x]) => `${k} ${Math.round(x * 100)}%`).join(" / ")}`);
  if (v.rate_scale) parts.push(`rate ×${v.rate_scale}`);
  if (v.class_overrides) parts.push(`classes ${JSON.stringify(v.class_overrides)}`);
  if (v.override) parts.push(`override ${JSON.stringify(v.override)}`);
  return parts.join("; ");
}

/** A stored comparison: progress while it runs, then the table, charts and exports. */
export async function renderComparison(el, id, alive) {
  const progress = h("progress", { max: 1, value: 0, "aria-label": "variants solved" });
  const progressText = h("span", { role: "status", "aria-live": "polite" }, "Loading…");
  const body = h("div", { class: "results" });
  mount(
    el,
    h("div", { class: "page-head" }, h("h1", { id: "cmp-title" }, "Comparison")),
    h("div", { class: "progress-row" }, progress, progressText),
    body,
  );
  for (;;) {
    let c;
    try {
      c = await get(`/comparisons/${encodeURIComponent(id)}`);
    } catch (err) {
      if (err instanceof ApiError && err.status === 404) {
        mount(body, notice("error", "No comparison with this id. ", h("a", { href: "#/history" }, "See the stored ones")));
        return;
      }
      throw err;
    }
    if (alive && !alive()) return;
    document.getElementById("cmp-title").textContent = c.name || "Comparison";
    progress.max = c.total;
    progress.value = c.done;
    if (c.status === "running") {
      mount(progressText, h("span", { class: "spinner", "aria-hidden": "true" }), ` Solving: ${c.done} of ${c.total} plans done…`);
      mount(body, variantStatus(c));
      await new Promise((r) => setTimeout(r, POLL_MS));
      if (alive && !alive()) return;
      continue;
    }
    progressText.textContent = c.status === "done" ? `Done: ${c.total} plans, finished ${when(c.finished_at)}.` : `Failed: ${c.error}`;
    mount(body, c.status === "done" ? results(c) : notice("error", c.error || "The comparison failed."));
    return;
  }
}

function variantStatus(c) {
  return h(
    "ul",
    { class: "variant-list" },
    c.variants.map((v) => h("li", {}, `${v.name}: `, v.status === "pending" ? h("span", { class: "muted" }, "pending") : h("span", { class: `status ${v.status}` }, v.status))),
  );
}

function results(c) {
  const colors = store.config.gpu_colors;
  const rows = c.table || [];
  const base = rows.find((r) => r.variant === "base") || rows[0] || {};
  const gpuTypes = [...new Set(rows.flatMap((r) => Object.keys(r.gpus_by_type || {})))];
  const classes = Object.keys(base.modes || {});
  const exports = ["csv", "xlsx", "html", "md"].map((f) =>
    h(
      "a",
      {
        class: "button small",
        href: `/comparisons/${c.id}/report?format=${f}`,
        target: f === "html" ? "_blank" : null,
        rel: f === "html" ? "noopener" : null,
        download: f === "html" ? null : `comparison-${c.id.slice(0, 8)}.${f}`,
      },
      f.toUpperCase(),
    ),
  );
  const planned = rows.filter((r) => Number.isFinite(r.cost_usd_per_hour));
  return [
    h("nav", { class: "card reports", "aria-label": "Exports" }, h("strong", {}, "Export: "), exports),
    h(
      "section",
      { class: "card", "aria-labelledby": "cost-h" },
      h("h2", { id: "cost-h" }, "Cost and GPUs against the base"),
      h(
        "div",
        { class: "two-col" },
        stackedBars(
          planned.map((r) => ({
            label: r.variant,
            segments: [{ value: r.cost_usd_per_hour, color: r.variant === "base" ? "#555" : "#2f6db5", title: `${r.variant}: ${usd(r.cost_usd_per_hour)}/h (${fmtDelta(r)})` }],
            note: `${usd(r.cost_usd_per_hour)} ${r.variant === "base" ? "" : fmtDelta(r)}`,
          })),
          usd,
          { title: "Cost per hour by variant (dashed line: the base)", baseline: base.cost_usd_per_hour, width: 560 },
        ),
        stackedBars(
          planned.map((r) => ({
            label: r.variant,
            segments: Object.entries(r.gpus_by_type || {}).map(([g, n]) => ({ value: n, color: colors[g] || "#888", title: `${r.variant}: ${n} ${g}` })),
            note: `${num(r.gpus_total)} GPUs`,
          })),
          (x) => `${num(x)} GPUs`,
          { title: "GPUs by type per variant (dashed line: the base)", baseline: base.gpus_total, width: 560, legend: gpuTypes.map((g) => [g, colors[g] || "#888"]) },
        ),
      ),
    ),
    h(
      "section",
      { class: "card", "aria-labelledby": "tbl-h" },
      h("h2", { id: "tbl-h" }, "Table"),
      table(
        [
          { label: "Variant", get: (r) => (r.plan_id ? h("a", { href: `#/plans/${r.plan_id}` }, r.variant) : r.variant) },
          { label: "Status", get: (r) => h("span", { class: `status ${r.status}` }, r.status) },
          { label: "$/h", num: true, get: (r) => usd(r.cost_usd_per_hour) },
          { label: "vs base", num: true, get: (r) => (r.variant === "base" ? "—" : fmtDelta(r)) },
          { label: "$/Mtok", num: true, get: (r) => usd(r.cost_usd_per_million_tokens, 3) },
          { label: "GPUs", num: true, get: (r) => num(r.gpus_total) },
          { label: "By type", get: (r) => h("span", { class: "chips" }, Object.entries(r.gpus_by_type || {}).map(([g, n]) => h("span", {}, gpuChip(g, colors), ` ×${n}`))) },
          { label: "P:D", num: true, get: (r) => num(r.pool_ratio_prefill_to_decode, 2) },
          ...classes.map((k) => ({
            label: `${k}: mode, TTFT / TPOT`,
            get: (r) => (r.modes && r.modes[k] ? `${r.modes[k]}, ${ms(r.ttft_ms[k])} / ${ms(r.tpot_ms[k])}${r.meets_slo[k] === false ? " ✗" : ""}` : r.error || "–"),
          })),
        ],
        rows.map((r) => ({ ...r, plan_id: r.plan_id || (c.variants.find((v) => v.name === r.variant) || {}).plan_id })),
        { "data-testid": "comparison-table" },
      ),
    ),
  ];
}

function fmtDelta(r) {
  if (!Number.isFinite(r.delta_usd_per_hour)) return "–";
  const sign = r.delta_usd_per_hour >= 0 ? "+" : "−";
  return `${sign}${usd(Math.abs(r.delta_usd_per_hour))} (${sign}${Math.abs(r.delta_pct).toFixed(1)}%)`;
}
