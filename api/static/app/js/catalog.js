// The catalog (GPUs, models, workloads with their sources and the provenance of each
// GPU's efficiency factors) and calibrations: list them, and fit one from a
// `vllm bench serve --save-result` file (POST /calibrations).

import { ApiError, get, post } from "./api.js";
import { gpuChip, h, mount, notice, num, table, usd, when } from "./dom.js";
import { store } from "./state.js";

const TABS = ["gpus", "models", "workloads", "calibrations"];

export async function renderCatalog(el) {
  const panel = h("div", { id: "catalog-panel", role: "tabpanel" });
  const buttons = TABS.map((t) =>
    h(
      "button",
      { type: "button", role: "tab", id: `tab-${t}`, "aria-controls": "catalog-panel", onclick: () => show(t) },
      t === "gpus" ? "GPUs" : t[0].toUpperCase() + t.slice(1),
    ),
  );
  // the ARIA tabs pattern: one tab in the Tab order, arrows (and Home/End) move along
  const onKey = (e) => {
    const i = buttons.indexOf(e.currentTarget);
    const to = { ArrowRight: i + 1, ArrowLeft: i - 1, Home: 0, End: buttons.length - 1 }[e.key];
    if (to === undefined) return;
    e.preventDefault();
    const j = (to + buttons.length) % buttons.length;
    buttons[j].focus();
    show(TABS[j]);
  };
  for (const b of buttons) b.addEventListener("keydown", onKey);
  function show(t) {
    for (const b of buttons) {
      const on = b.id === `tab-${t}`;
      b.setAttribute("aria-selected", String(on));
      b.tabIndex = on ? 0 : -1;
    }
    panel.setAttribute("aria-labelledby", `tab-${t}`);
    mount(panel, h("p", { class: "muted" }, "Loading…"));
    const render = { gpus: gpusTab, models: modelsTab, workloads: workloadsTab, calibrations: calibrationsTab }[t];
    Promise.resolve(render(panel)).catch((err) => mount(panel, notice("error", err.message)));
  }
  mount(el, h("div", { class: "page-head" }, h("h1", {}, "Catalog and calibration")), h("div", { class: "tabs", role: "tablist" }, buttons), panel);
  show("gpus");
}

function sources(entry) {
  const list = entry.sources || [];
  if (!list.length) return "–";
  return h(
    "details",
    {},
    h("summary", {}, `${list.length} source${list.length > 1 ? "s" : ""}`),
    h("ul", {}, list.map((s) => h("li", {}, typeof s === "string" ? s : [s.title || s.name || "", s.url ? ` (${s.url})` : "", s.accessed ? `, ${s.accessed}` : ""]))),
  );
}

function gpusTab(panel) {
  const colors = store.config.gpu_colors;
  mount(
    panel,
    table(
      [
        { label: "GPU", get: (g) => gpuChip(g.id, colors) },
        { label: "Name", get: (g) => g.name },
        {
          label: "Memory GB",
          num: true,
          // the driver's figure is what engines take their share of (planner.roofline.gpu_memory_bytes)
          get: (g) =>
            g.reported_memory
              ? `${num(g.memory_gb)} (${num((g.reported_memory.mib * 2 ** 20) / 1e9, 1)} reported)`
              : num(g.memory_gb),
        },
        { label: "HBM TB/s", num: true, get: (g) => num(g.mem_bw_tbps, 2) },
        { label: "BF16 / FP8 TFLOP/s", num: true, get: (g) => `${num(g.bf16_dense_tflops)} / ${num(g.fp8_dense_tflops)}` },
        { label: "$/h", num: true, get: (g) => `${usd(g.price.usd_per_hour, 2)}${g.price.estimate ? " est." : ""}` },
        { label: "Efficiency (provenance)", get: (g) => efficiency(g.efficiency) },
        { label: "Source", get: (g) => g.source },
        { label: "Sources", get: sources },
      ],
      store.catalog.gpus,
      { "aria-label": "GPUs" },
    ),
  );
}

function efficiency(eff) {
  if (!eff) return "–";
  const parts = [`MFU ${num(eff.prefill_mfu, 2)}`, `MBU ${num(eff.decode_mbu, 2)}`];
  const prov = eff.provenance ? `${eff.provenance}${eff.points ? `, ${eff.points} points` : ""}${eff.sigma_log ? `, σ ${num(eff.sigma_log, 2)}` : ""}${eff.downside_sigma_log && num(eff.downside_sigma_log, 2) !== num(eff.sigma_log, 2) ? ` (derate σ ${num(eff.downside_sigma_log, 2)})` : ""}` : "";
  return `${parts.join(" · ")}${prov ? ` (${prov})` : ""}`;
}

function modelsTab(panel) {
  mount(
    panel,
    table(
      [
        { label: "Model", get: (m) => m.id },
        { label: "Name", get: (m) => m.name },
        { label: "Layers", num: true, get: (m) => num(m.num_layers) },
        { label: "Context", num: true, get: (m) => num(m.max_context_tokens) },
        { label: "MoE", get: (m) => (m.moe ? `${m.moe.num_experts || ""} experts` : "dense") },
        { label: "Weights", get: (m) => (m.weight_dtypes || []).join(", ") },
        { label: "Hugging Face", get: (m) => m.hf_repo },
        { label: "Source", get: (m) => m.source },
        { label: "Sources", get: sources },
      ],
      store.catalog.models,
      { "aria-label": "Models" },
    ),
  );
}

function workloadsTab(panel) {
  mount(
    panel,
    table(
      [
        { label: "Workload", get: (w) => w.id },
        { label: "Description", get: (w) => w.description },
        { label: "Prompt mean / p90", num: true, get: (w) => `${num(w.prompt_tokens.mean_tokens)} / ${num(w.prompt_tokens.p90_tokens)}` },
        { label: "Output mean / p90", num: true, get: (w) => `${num(w.output_tokens.mean_tokens)} / ${num(w.output_tokens.p90_tokens)}` },
        { label: "Prefix hits", num: true, get: (w) => `${Math.round(w.prefix_hit_rate * 100)}%` },
        { label: "SLO p-TTFT / TPOT", get: (w) => `p${w.slo.percentile} ${num(w.slo.ttft_ms)} / ${num(w.slo.tpot_ms)} ms` },
        { label: "Source", get: (w) => w.source },
        { label: "Sources", get: sources },
      ],
      store.catalog.workloads,
      { "aria-label": "Workloads" },
    ),
  );
}

/** A measurement from a `vllm bench serve --save-result` JSON, with what the file
 * does not say (model, GPU, tp, dtype) from the form. */
export function vllmMeasurement(data, fill) {
  const done = Number.isInteger(data.completed) && data.completed > 0 ? data.completed : null;
  const mean = (key, total) => {
    if (done && Number.isFinite(data[total])) return Math.round(data[total] / done);
    const lens = data[key];
    return Array.isArray(lens) && lens.length ? Math.round(lens.reduce((a, b) => a + b, 0) / lens.length) : undefined;
  };
  const m = {
    ...fill,
    engine: "vllm",
    isl: mean("input_lens", "total_input_tokens"),
    osl: mean("output_lens", "total_output_tokens"),
    output_tok_s: data.output_throughput,
    ttft_ms: data.mean_ttft_ms,
    tpot_ms: data.mean_tpot_ms,
  };
  if (data.max_concurrency) m.concurrency = data.max_concurrency;
  else if (Number.isFinite(data.request_rate)) {
    m.request_rate_rps = data.request_rate;
    if (done) m.num_requests = done;
  }
  for (const k of Object.keys(m)) if (m[k] === undefined || m[k] === null) delete m[k];
  return m;
}

/** The catalog model a result file names (its Hugging Face repository), else its name. */
function modelOf(data) {
  const named = data.model_id || data.model;
  if (typeof named !== "string") return undefined;
  const found = store.catalog.models.find((m) => m.id === named || (m.hf_repo || "").toLowerCase() === named.toLowerCase());
  return found ? found.id : named;
}

async function calibrationsTab(panel) {
  const list = await get("/calibrations");
  const out = h("div", { "aria-live": "polite" });
  const ids = { name: "cal-name", file: "cal-file", model: "cal-model", gpu: "cal-gpu", tp: "cal-tp", dtype: "cal-dtype" };
  const form = h(
    "form",
    {
      class: "card calibrate",
      novalidate: true,
      onsubmit: async (e) => {
        e.preventDefault();
        const file = form.querySelector(`#${ids.file}`).files[0];
        if (!file) {
          mount(out, notice("error", "Choose the JSON file `vllm bench serve --save-result` wrote."));
          return;
        }
        let data;
        try {
          data = JSON.parse(await file.text());
        } catch (err) {
          mount(out, notice("error", `${file.name} is not JSON: ${err.message}`));
          return;
        }
        const fill = {
          model: form.querySelector(`#${ids.model}`).value || modelOf(data),
          gpu: form.querySelector(`#${ids.gpu}`).value,
          tp: Number(form.querySelector(`#${ids.tp}`).value),
          dtype: form.querySelector(`#${ids.dtype}`).value,
          source: file.name,
        };
        const measurements = Array.isArray(data.measurements) ? data.measurements.map((m) => ({ ...fill, ...m })) : [vllmMeasurement(data, fill)];
        mount(out, h("p", { class: "muted" }, h("span", { class: "spinner", "aria-hidden": "true" }), " Fitting…"));
        try {
          const cal = await post("/calibrations", { name: form.querySelector(`#${ids.name}`).value.trim(), measurements });
          mount(out, notice("ok", `Stored calibration “${cal.name}”. Name it in a plan request as `, h("code", {}, `"calibration": "${cal.name}"`), "."), factorsTable(cal), h("details", {}, h("summary", {}, "The calibration as stored (factors, errors, residuals)"), h("pre", {}, JSON.stringify(cal, null, 2))));
          drawList(await get("/calibrations"));
        } catch (err) {
          const issues = err instanceof ApiError ? err.issues : [];
          mount(out, notice("error", err.message, issues.length ? h("ul", {}, issues.map((i) => h("li", {}, h("code", {}, i.field), " ", i.message))) : null));
        }
      },
    },
    h("h2", {}, "Calibrate from a vllm bench serve result"),
    h("p", { class: "hint" }, "The file names neither the GPU nor the parallelism: say them here. A fleetplan measurements file ({\"measurements\": [...]}) works too."),
    h(
      "div",
      { class: "grid" },
      labelled(ids.name, "Calibration name", h("input", { id: ids.name, type: "text", required: true, pattern: "[a-z0-9][a-z0-9._\\-]*", placeholder: "my-cluster" })),
      labelled(ids.file, "Result file (JSON)", h("input", { id: ids.file, type: "file", accept: ".json,application/json" })),
      labelled(ids.model, "Model", h("select", { id: ids.model }, h("option", { value: "" }, "as the file says"), store.catalog.models.map((m) => h("option", { value: m.id }, m.id)))),
      labelled(ids.gpu, "GPU", h("select", { id: ids.gpu }, store.catalog.gpus.map((g) => h("option", { value: g.id }, g.id)))),
      labelled(ids.tp, "Tensor parallel", h("select", { id: ids.tp }, [1, 2, 4, 8].map((t) => h("option", { value: t }, t)))),
      labelled(ids.dtype, "dtype", h("select", { id: ids.dtype }, ["bf16", "fp8", "fp4"].map((d) => h("option", { value: d }, d)))),
    ),
    h("div", { class: "row" }, h("button", { type: "submit", class: "primary" }, "Fit and store")),
    out,
  );
  const listHost = h("div");
  function drawList(items) {
    mount(
      listHost,
      items.length
        ? table(
          [
            { label: "Name", get: (c) => c.name },
            { label: "Created", get: (c) => when(c.created_at) },
            { label: "Groups (GPU, dtype, engine: points)", get: (c) => c.groups.map((g) => `${g.gpu} ${g.dtype || ""} ${g.engine || ""}: ${g.points}`).join("; ") },
          ],
            items,
            { "aria-label": "Calibrations" },
          )
        : h("p", { class: "empty" }, "No calibration stored yet."),
    );
  }
  drawList(list);
  mount(panel, h("h2", {}, "Stored calibrations"), listHost, form);
}

/** The fitted factors of a calibration, one row per (GPU, dtype, engine). */
function factorsTable(cal) {
  return table(
    [
      { label: "GPU", get: (f) => gpuChip(f.gpu, store.config.gpu_colors) },
      { label: "dtype", get: (f) => f.dtype || "–" },
      { label: "Engine", get: (f) => f.engine || "any" },
      { label: "Prefill MFU", num: true, get: (f) => num(f.prefill_mfu, 3) },
      { label: "Decode MBU", num: true, get: (f) => num(f.decode_mbu, 3) },
      { label: "Step overhead ms", num: true, get: (f) => num(f.step_overhead_ms, 2) },
      { label: "Points", num: true, get: (f) => num(f.points) },
      { label: "Median error before → after", num: true, get: (f) => `${num(100 * f.median_ape_before, 1)}% → ${num(100 * f.median_ape_after, 1)}%` },
    ],
    cal.factors || [],
    { "aria-label": "Fitted factors" },
  );
}

function labelled(id, text, input) {
  return h("div", { class: "field" }, h("label", { for: id }, text), input);
}
