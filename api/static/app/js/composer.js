// The plan composer: a form over a plan request (model, traffic classes from workload
// templates, SLOs, candidates, constraints, objective) and its JSON or YAML, editable
// both ways. Validation as you type (POST /plans/validate, debounced) and on submit
// (POST /plans) shows the API's 422 issues next to the field each names.

import { ApiError, get, post } from "./api.js";
import { clone, gpuChip, h, mount, notice } from "./dom.js";
import { checkList, clearErrors, field, showErrors, syncInputs } from "./fields.js";
import { go, store } from "./state.js";
import { CORE_SCHEMA, dump as yamlDump, load as yamlLoad } from "./vendor/js-yaml.js";

/** The request's text views: JSON, or YAML as the shipped examples are written (js-yaml,
 * vendored with its licence in ./vendor). Each turns the draft into text and back. */
const FORMATS = {
  json: {
    label: "JSON",
    mime: "application/json",
    text: (doc) => JSON.stringify(doc, null, 2),
    parse: (text) => JSON.parse(text),
  },
  yaml: {
    label: "YAML",
    mime: "application/yaml",
    text: (doc) => yamlDump(doc, { noRefs: true, lineWidth: 100, schema: CORE_SCHEMA }),
    parse: (text) => yamlLoad(text, { schema: CORE_SCHEMA }),
  },
};
const FORMAT_KEY = "fleetplan.requestFormat";

function savedFormat() {
  const f = sessionStorage.getItem(FORMAT_KEY);
  return f in FORMATS ? f : "json";
}

const DEFAULT_REQUEST = {
  name: "my fleet",
  model: "llama-3.1-70b",
  traffic: { rate_rps: 100, classes: [{ workload: "chat", share: 1 }] },
  slo: { percentile: 90 },
  candidates: { modes: ["aggregated", "disaggregated"], dtypes: ["bf16", "fp8"] },
  objective: "min_cost",
};

const VALIDATE_DELAY_MS = 500;

/** Load a request document into the composer (from an example or a stored plan). */
export function loadDraft(doc) {
  store.draft = clone(doc);
}

function workload(id) {
  return store.catalog.workloads.find((w) => w.id === id);
}

/** Rates per class from the shares, and back: a class's rate edits the total and the shares. */
function setClassRate(doc, index, rate) {
  const total = doc.traffic.rate_rps || 0;
  const rates = doc.traffic.classes.map((c) => round((c.share || 0) * total, 3));
  rates[index] = Math.max(0, rate);
  const sum = rates.reduce((a, b) => a + b, 0);
  if (sum <= 0) return;
  doc.traffic.rate_rps = round(sum, 6);
  const shares = rates.map((r) => round(r / sum, 6));
  const rest = shares.slice(0, -1).reduce((a, b) => a + b, 0);
  shares[shares.length - 1] = round(1 - rest, 6);
  doc.traffic.classes.forEach((c, i) => {
    c.share = shares[i];
  });
}

function round(x, digits) {
  const f = 10 ** digits;
  return Math.round(x * f) / f;
}

export async function renderComposer(el) {
  if (!store.draft) store.draft = clone(DEFAULT_REQUEST);
  const doc = store.draft;
  const status = h("div", { class: "submit-status", role: "status", "aria-live": "polite" });
  const summary = h("div", { class: "error-summary", "aria-live": "assertive" });
  const jsonArea = h("textarea", {
    id: "request-json",
    class: "json",
    spellcheck: "false",
    rows: 30,
    "aria-describedby": "request-json-err",
  });
  const jsonError = h("p", { class: "field-error", id: "request-json-err", "aria-live": "polite" });
  let format = savedFormat();
  const jsonHeading = h("h2", { id: "json-h" }, `Request (${FORMATS[format].label})`);
  const jsonLabel = h("label", { for: "request-json", class: "sr-only" }, `Request as ${FORMATS[format].label}`);
  const formHost = h("div", { class: "form-host" });
  let validateTimer = null;
  let validateSeq = 0;

  const bind = {
    get doc() {
      return store.draft;
    },
    changed() {
      syncInputs(formHost, store.draft);
      refreshRates(store.draft);
      writeJson();
      scheduleValidate();
    },
  };

  function writeJson() {
    if (document.activeElement !== jsonArea) jsonArea.value = FORMATS[format].text(store.draft);
    jsonError.textContent = "";
  }

  function rebuild() {
    mount(formHost, buildForm(bind, rebuild));
    writeJson();
    scheduleValidate();
  }

  function showIssues(issues, focus) {
    clearErrors(formHost);
    const unplaced = showErrors(formHost, issues, focus);
    mount(
      summary,
      issues.length
        ? notice(
            "error",
            h("strong", {}, `${issues.length} problem${issues.length > 1 ? "s" : ""} in the request`),
            h(
              "ul",
              {},
              issues.map((i) => h("li", {}, h("code", {}, i.field), " ", i.message)),
            ),
            unplaced.length ? h("p", { class: "muted" }, "Fields not in the form are in the JSON on the right.") : null,
          )
        : null,
    );
  }

  function scheduleValidate() {
    clearTimeout(validateTimer);
    validateTimer = setTimeout(validateNow, VALIDATE_DELAY_MS);
  }

  async function validateNow() {
    const seq = ++validateSeq;
    try {
      const result = await post("/plans/validate", store.draft);
      if (seq !== validateSeq) return;
      showIssues([], false);
      mount(
        status,
        result.warnings.length
          ? notice("info", h("strong", {}, "Valid, with warnings: "), result.warnings.join(" "))
          : h("span", { class: "ok-text" }, "✓ The request is valid."),
      );
    } catch (err) {
      if (seq !== validateSeq) return;
      if (err instanceof ApiError && err.status === 422) {
        showIssues(err.issues.length ? err.issues : [{ field: "", message: err.message }], false);
        mount(status);
      }
    }
  }

  jsonArea.addEventListener("input", () => {
    try {
      const parsed = FORMATS[format].parse(jsonArea.value);
      if (parsed === null || typeof parsed !== "object" || Array.isArray(parsed)) {
        throw new Error(`the request must be a ${FORMATS[format].label} mapping of fields`);
      }
      store.draft = parsed;
      jsonError.textContent = "";
      mount(formHost, buildForm(bind, rebuild));
      scheduleValidate();
    } catch (err) {
      jsonError.textContent = `Not applied: ${err.message}`;
    }
  });

  const submit = h("button", { type: "submit", class: "primary", "data-testid": "submit-plan" }, "Plan this fleet");
  const form = h(
    "form",
    {
      class: "composer",
      novalidate: true,
      onsubmit: async (e) => {
        e.preventDefault();
        clearTimeout(validateTimer);
        validateSeq++;
        submit.disabled = true;
        mount(status, h("span", { class: "spinner", "aria-hidden": "true" }), " Planning… (screening, solving and checking the fleet: a few seconds)");
        try {
          const record = await post("/plans", store.draft);
          mount(status, "Planned.");
          go(`#/plans/${record.id}`);
        } catch (err) {
          if (err instanceof ApiError && err.status === 422) {
            showIssues(err.issues.length ? err.issues : [{ field: "", message: err.message }], true);
            mount(status, notice("error", "The API refused the request: see the fields marked in red."));
          } else if (err instanceof ApiError && err.status === 401) {
            mount(status, notice("error", `${err.message}: enter the API key at the top right and press Keep.`));
            document.getElementById("api-key").focus();
          } else {
            mount(status, notice("error", `Planning failed: ${err.message}`));
          }
        } finally {
          submit.disabled = false;
        }
      },
    },
    h("div", { class: "composer-grid" }, h("div", { class: "composer-form" }, summary, formHost), jsonPanel()),
    h("div", { class: "actions sticky" }, submit, status),
  );

  function setFormat(key) {
    format = key;
    sessionStorage.setItem(FORMAT_KEY, key);
    jsonHeading.textContent = `Request (${FORMATS[key].label})`;
    jsonLabel.textContent = `Request as ${FORMATS[key].label}`;
    jsonArea.value = FORMATS[key].text(store.draft);
    jsonError.textContent = "";
  }

  function jsonPanel() {
    return h(
      "section",
      { class: "json-panel", "aria-labelledby": "json-h" },
      jsonHeading,
      h("p", { class: "hint" }, "Edit either side: the form and this text stay in step. Fields the form lacks (scenarios, procurement, verify...) are kept."),
      h(
        "fieldset",
        { class: "format-toggle" },
        h("legend", { class: "sr-only" }, "Request format"),
        Object.entries(FORMATS).map(([key, f]) =>
          h(
            "label",
            { class: "check-item" },
            h("input", {
              type: "radio",
              name: "request-format",
              value: key,
              "data-testid": `format-${key}`,
              checked: key === format,
              onchange: () => setFormat(key),
            }),
            ` ${f.label}`,
          ),
        ),
      ),
      jsonLabel,
      jsonArea,
      jsonError,
      h(
        "div",
        { class: "row" },
        h("button", { type: "button", class: "small", onclick: () => download(`request.${format}`, jsonArea.value, FORMATS[format].mime) }, "Download"),
        h("button", { type: "button", class: "small", onclick: () => { store.draft = clone(DEFAULT_REQUEST); rebuild(); } }, "Start over"),
      ),
    );
  }

  const examples = await get("/examples");
  const planExamples = examples.filter((x) => x.kind === "plan");
  const exampleSelect = h(
    "select",
    {
      id: "example",
      "data-testid": "load-example",
      onchange: async () => {
        const name = exampleSelect.value;
        if (!name) return;
        const ex = await get(`/examples/${encodeURIComponent(name)}`);
        if (ex.kind === "comparison") {
          store.compareDraft = ex.document;
          store.compareFrom = null;
          go("#/compare");
          return;
        }
        store.draft = ex.document;
        exampleInfo.textContent = ex.description;
        rebuild();
      },
    },
    h("option", { value: "" }, "Choose a shipped example…"),
    h("optgroup", { label: "Plan requests" }, planExamples.map((x) => h("option", { value: x.name }, `${x.name} — ${x.title}`))),
    h(
      "optgroup",
      { label: "What-ifs (open in What-ifs)" },
      examples.filter((x) => x.kind === "comparison").map((x) => h("option", { value: x.name }, `${x.name} — ${x.title}`)),
    ),
  );
  const exampleInfo = h("p", { class: "hint example-info" });

  mount(
    el,
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, "Plan a fleet"),
      h("div", { class: "field inline" }, h("label", { for: "example" }, "Load an example"), exampleSelect),
    ),
    exampleInfo,
    form,
  );
  rebuild();
}

function download(name, text, mime) {
  const url = URL.createObjectURL(new Blob([text], { type: mime }));
  const a = h("a", { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function buildForm(bind, rebuild) {
  const doc = bind.doc;
  if (!doc.traffic || typeof doc.traffic !== "object") doc.traffic = { rate_rps: 100, classes: [] };
  if (!Array.isArray(doc.traffic.classes)) doc.traffic.classes = [];
  const models = store.catalog.models.map((m) => [m.id, m.id]);
  const gpus = store.catalog.gpus.map((g) => [
    g.id,
    ` ${g.name} · $${g.price.usd_per_hour}/h`,
    gpuChip(g.id, store.config.gpu_colors).firstChild,
  ]);

  return [
    h(
      "fieldset",
      { class: "group", dataset: { path: "(body)" } },
      h("legend", {}, "Model"),
      h(
        "div",
        { class: "grid" },
        field(bind, "name", "Plan name", { kind: "text", placeholder: "optional" }),
        field(bind, "model", "Model", { kind: "select", options: models, blank: "— choose —" }),
        field(bind, "objective", "Objective", {
          kind: "select",
          options: [
            ["min_cost", "min cost"],
            ["max_goodput", "max goodput"],
          ],
          blank: "default (min cost)",
        }),
        field(bind, "calibration", "Calibration", { kind: "text", placeholder: "none (stored name)" }),
      ),
      h("p", { class: "field-error" }),
    ),
    trafficGroup(bind, rebuild),
    h(
      "fieldset",
      { class: "group", dataset: { path: "slo" } },
      h("legend", {}, "Default SLOs", h("span", { class: "hint" }, " (a class's own SLO, then the workload's, win)")),
      h(
        "div",
        { class: "grid" },
        field(bind, "slo.ttft_ms", "p-TTFT (ms)", { placeholder: "workload's" }),
        field(bind, "slo.tpot_ms", "p-TPOT (ms)", { placeholder: "workload's" }),
        field(bind, "slo.percentile", "Percentile", { placeholder: "90" }),
      ),
      h("p", { class: "field-error" }),
    ),
    h(
      "fieldset",
      { class: "group", dataset: { path: "candidates" } },
      h("legend", {}, "Candidates"),
      checkList(bind, "candidates.gpus", "GPU types", gpus, { wide: true, hint: " (none ticked: every type)" }),
      h(
        "div",
        { class: "row checklists" },
        checkList(bind, "candidates.modes", "Modes", [
          ["aggregated", " aggregated (chunked prefill)"],
          ["disaggregated", " disaggregated (prefill/decode)"],
        ]),
        checkList(bind, "candidates.dtypes", "Weight dtypes", [
          ["bf16", " bf16"],
          ["fp8", " fp8"],
          ["fp4", " fp4"],
        ]),
      ),
      h("p", { class: "field-error" }),
    ),
    h(
      "fieldset",
      { class: "group", dataset: { path: "constraints" } },
      h("legend", {}, "Constraints"),
      h(
        "div",
        { class: "grid" },
        field(bind, "constraints.budget_usd_per_hour", "Budget ($/h)", { placeholder: "none" }),
        field(bind, "constraints.power_kw", "Power (kW)", { placeholder: "none" }),
        field(bind, "constraints.max_utilization", "Max pool load", { placeholder: "0.85" }),
        field(bind, "constraints.spare_replicas_per_pool", "Spare replicas / pool", { placeholder: "0" }),
        field(bind, "constraints.min_replicas_per_pool", "Min replicas / pool", { placeholder: "1" }),
        field(bind, "constraints.max_replicas_per_pool", "Max replicas / pool", { placeholder: "none" }),
        field(bind, "constraints.max_gpu_types", "Max GPU types", { placeholder: "none" }),
        field(bind, "constraints.max_configurations", "Max configurations", { placeholder: "none" }),
      ),
      h("p", { class: "field-error" }),
    ),
    h(
      "fieldset",
      { class: "group", dataset: { path: "verify" } },
      h("legend", {}, "Verification"),
      h(
        "div",
        { class: "grid" },
        field(bind, "verify.enabled", "Simulate the fleet", {
          kind: "select",
          parse: (v) => v === "true",
          format: (v) => (v === true ? "true" : v === false ? "false" : ""),
          options: [
            ["true", "on"],
            ["false", "off (faster)"],
          ],
          blank: "server default",
        }),
        field(bind, "verify.requests", "Simulated requests", { placeholder: "20000" }),
      ),
      h("p", { class: "field-error" }),
    ),
  ];
}

function trafficGroup(bind, rebuild) {
  const doc = bind.doc;
  const classes = doc.traffic.classes;
  const addSelect = h(
    "select",
    { id: "add-workload" },
    store.catalog.workloads.map((w) => h("option", { value: w.id }, `${w.id} — ${w.name}`)),
  );
  const classCards = classes.map((c, i) => classCard(bind, rebuild, c, i));
  return h(
    "fieldset",
    { class: "group", dataset: { path: "traffic" } },
    h("legend", {}, "Traffic"),
    h(
      "div",
      { class: "grid" },
      field(bind, "traffic.rate_rps", "Total rate (req/s)", { min: 0 }),
      field(bind, "traffic.burst_cv", "Burstiness (CV)", { placeholder: "1 (Poisson)" }),
    ),
    h("div", { class: "classes", dataset: { path: "traffic.classes" } }, classCards, h("p", { class: "field-error" })),
    h(
      "div",
      { class: "row add-class" },
      h("label", { for: "add-workload" }, "Add a class from a workload template"),
      addSelect,
      h(
        "button",
        {
          type: "button",
          class: "small",
          onclick: () => {
            const wl = addSelect.value;
            const taken = new Set(classes.map((c) => c.name || c.workload));
            const entry = { workload: wl, share: classes.length ? 0 : 1 };
            if (taken.has(wl)) entry.name = `${wl}-${classes.length + 1}`;
            classes.push(entry);
            rebuild();
          },
        },
        "Add class",
      ),
      classes.length > 1
        ? h(
            "button",
            {
              type: "button",
              class: "small",
              onclick: () => {
                const sum = classes.reduce((a, c) => a + (Number(c.share) || 0), 0);
                if (sum <= 0) return;
                classes.forEach((c, i) => {
                  c.share = i === classes.length - 1 ? 0 : round((Number(c.share) || 0) / sum, 6);
                });
                const rest = classes.slice(0, -1).reduce((a, c) => a + c.share, 0);
                classes[classes.length - 1].share = round(1 - rest, 6);
                rebuild();
              },
            },
            "Make the shares sum to 1",
          )
        : null,
    ),
    h("p", { class: "field-error" }),
  );
}

function classCard(bind, rebuild, c, i) {
  const base = `traffic.classes[${i}]`;
  const wl = workload(c.workload);
  const ph = (x) => (x === undefined || x === null ? "" : String(x));
  const rateId = `class-rate-${i}`;
  const rateInput = h("input", {
    id: rateId,
    type: "number",
    step: "any",
    min: 0,
    inputmode: "decimal",
    value: round((c.share || 0) * (bind.doc.traffic.rate_rps || 0), 4),
  });
  rateInput.addEventListener("input", () => {
    const v = Number(rateInput.value);
    if (rateInput.value.trim() === "" || !Number.isFinite(v)) return;
    setClassRate(bind.doc, i, v);
    bind.changed(`${base}.share`);
  });
  rateInput.dataset.classRate = String(i);
  const workloads = store.catalog.workloads.map((w) => [w.id, w.id]);
  return h(
    "div",
    { class: "class-card", dataset: { path: base } },
    h(
      "div",
      { class: "class-head" },
      h("h3", {}, `Class ${i + 1}: ${c.name || c.workload}`),
      h("span", { class: "hint" }, wl ? wl.description : "unknown workload"),
      h(
        "button",
        {
          type: "button",
          class: "small ghost",
          "aria-label": `Remove class ${i + 1}`,
          onclick: () => {
            bind.doc.traffic.classes.splice(i, 1);
            rebuild();
          },
        },
        "Remove",
      ),
    ),
    h(
      "div",
      { class: "grid" },
      field(bind, `${base}.workload`, "Workload", { kind: "select", options: workloads }),
      field(bind, `${base}.name`, "Name", { kind: "text", placeholder: c.workload }),
      field(bind, `${base}.share`, "Share (0-1)", { min: 0, max: 1 }),
      h("div", { class: "field" }, h("label", { for: rateId }, "Rate (req/s)"), rateInput, h("p", { class: "field-error" })),
      field(bind, `${base}.prefix_hit_rate`, "Prefix hits (0-1)", { placeholder: ph(wl && wl.prefix_hit_rate) }),
    ),
    h(
      "div",
      { class: "grid" },
      h(
        "div",
        { class: "subgroup", dataset: { path: `${base}.prompt_tokens` } },
        h("span", { class: "sublabel" }, "Prompt tokens"),
        h(
          "div",
          { class: "pair" },
          field(bind, `${base}.prompt_tokens.mean_tokens`, "mean", { placeholder: ph(wl && wl.prompt_tokens.mean_tokens) }),
          field(bind, `${base}.prompt_tokens.p90_tokens`, "p90", { placeholder: ph(wl && wl.prompt_tokens.p90_tokens) }),
        ),
        h("p", { class: "field-error" }),
      ),
      h(
        "div",
        { class: "subgroup", dataset: { path: `${base}.output_tokens` } },
        h("span", { class: "sublabel" }, "Output tokens"),
        h(
          "div",
          { class: "pair" },
          field(bind, `${base}.output_tokens.mean_tokens`, "mean", { placeholder: ph(wl && wl.output_tokens.mean_tokens) }),
          field(bind, `${base}.output_tokens.p90_tokens`, "p90", { placeholder: ph(wl && wl.output_tokens.p90_tokens) }),
        ),
        h("p", { class: "field-error" }),
      ),
      h(
        "div",
        { class: "subgroup", dataset: { path: `${base}.slo` } },
        h("span", { class: "sublabel" }, "Class SLO"),
        h(
          "div",
          { class: "pair" },
          field(bind, `${base}.slo.ttft_ms`, "TTFT ms", { placeholder: ph(wl && wl.slo.ttft_ms) }),
          field(bind, `${base}.slo.tpot_ms`, "TPOT ms", { placeholder: ph(wl && wl.slo.tpot_ms) }),
        ),
        h("p", { class: "field-error" }),
      ),
    ),
    h("p", { class: "field-error" }),
  );

}

/** The per-class rate inputs, from the shares and the total rate. */
function refreshRates(doc) {
  for (const input of document.querySelectorAll("[data-class-rate]")) {
    if (input === document.activeElement) continue;
    const cls = doc.traffic && doc.traffic.classes && doc.traffic.classes[Number(input.dataset.classRate)];
    if (cls) input.value = round((cls.share || 0) * (doc.traffic.rate_rps || 0), 4);
  }
}
