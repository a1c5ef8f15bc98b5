// One stored plan (GET /plans/{id}): the headline, pools and classes with predicted
// and simulated latencies, why each mode and GPU, the binding limits, the
// alternatives, the uncertainty, launch commands, deployments and the reports.

import { ApiError, del, get } from "./api.js";
import { bandBar, sloChart, stackedBars } from "./charts.js";
import { clone, gpuChip, h, mount, ms, notice, num, pct, table, usd, when } from "./dom.js";
import { loadDraft } from "./composer.js";
import { go, store } from "./state.js";

const FORMAT_LABELS = { html: "HTML", md: "Markdown", csv: "CSV (bill of materials)", json: "JSON", xlsx: "Excel" };

export async function renderPlan(el, id) {
  mount(el, h("p", { class: "muted" }, h("span", { class: "spinner", "aria-hidden": "true" }), " Loading the plan…"));
  let record;
  try {
    record = await get(`/plans/${encodeURIComponent(id)}`);
  } catch (err) {
    if (err instanceof ApiError && err.status === 404) {
      mount(el, notice("error", "No plan with this id (deleted?). ", h("a", { href: "#/history" }, "See the stored plans")));
      return;
    }
    throw err;
  }
  mount(el, planView(record));
}

/** The whole view of a plan record. */
export function planView(record) {
  const plan = record.plan || {};
  const colors = store.config.gpu_colors;
  const id = record.id;
  return [
    h(
      "div",
      { class: "page-head" },
      h("h1", {}, record.name || "Plan", " ", h("span", { class: `status ${record.status}` }, record.status)),
      h(
        "div",
        { class: "row" },
        h("button", { type: "button", onclick: () => editPlan(record) }, "Edit and re-plan"),
        h("button", { type: "button", onclick: () => whatIf(record) }, "What-if from this plan"),
        h("button", { type: "button", class: "danger", onclick: (e) => deletePlan(e.target, id) }, "Delete"),
      ),
    ),
    h("p", { class: "muted" }, `${record.model} · planned ${when(record.created_at)} · id ${id}`),
    headline(record, plan, colors),
    plan.status === "infeasible" ? infeasible(plan) : null,
    warnings(plan),
    reports(id),
    plan.scenarios && plan.scenarios.length ? section("Scenarios", "scen-h", scenariosBlock(plan, colors)) : null,
    section("Pools", "pools-h", poolsBlock(plan, colors)),
    section("Classes", "classes-h", classesBlock(plan)),
    section("Why this fleet", "why-h", whyBlock(plan, colors, id)),
    section("Uncertainty", "unc-h", uncertaintyBlock(plan, colors)),
    plan.tco ? section("Total cost of ownership", "tco-h", tcoBlock(plan.tco)) : null,
    section("Launch and deploy", "launch-h", launchBlock(plan, id)),
  ];
}

function section(title, id, body) {
  return h("section", { class: "card", "aria-labelledby": id }, h("h2", { id }, title), body);
}

function editPlan(record) {
  loadDraft(record.request);
  go("#/plan");
}

function whatIf(record) {
  store.compareBase = clone(record.request);
  store.compareFrom = record.id;
  store.compareDraft = null;
  go("#/compare");
}

async function deletePlan(button, id) {
  if (!confirm("Delete this plan? Its reports go with it.")) return;
  button.disabled = true;
  try {
    await del(`/plans/${encodeURIComponent(id)}`);
    go("#/history");
  } catch (err) {
    button.disabled = false;
    button.after(notice("error", err.status === 401 ? "An API key is needed: enter it at the top right. " : "", err.message));
  }
}

function headline(record, plan, colors) {
  const band = plan.cost_band_usd_per_hour;
  const byType = Object.entries(plan.gpus_by_type || {});
  const tiles = [
    tile(
      "Cost per hour",
      h("span", { "data-testid": "plan-cost" }, usd(plan.cost_usd_per_hour)),
      plan.operations ? `+ ${usd(plan.operations.cost_usd_per_hour)}/h operations = ${usd(plan.total_cost_usd_per_hour)}/h` : null,
    ),
    tile(
      "Cost band (90%)",
      band ? `${usd(band[0])} – ${usd(band[1])}` : "–",
      band && plan.cost_usd_per_hour ? bandBar(band[0], plan.cost_usd_per_hour, band[1], usd, "cost band per hour") : null,
    ),
    tile("Per month", usd(plan.cost_usd_per_month), `${usd(plan.cost_usd_per_million_tokens, 3)} per million tokens`),
    tile(
      "GPUs",
      num(plan.gpus_total),
      h("span", { class: "chips" }, byType.map(([g, n]) => h("span", {}, gpuChip(g, colors), ` ×${n}`))),
    ),
    tile("Power", `${num(plan.power_kw, 1)} kW`, plan.pool_ratio_prefill_to_decode ? `prefill:decode GPUs ${num(plan.pool_ratio_prefill_to_decode, 2)}` : null),
  ];
  if (plan.tco) tiles.push(tile(`TCO, ${plan.tco.horizon_years} years`, usd(plan.tco.total_usd), `capex ${usd(plan.tco.capex_usd)} · ${plan.tco.purchase}`));
  const verification = plan.verification;
  if (verification) {
    tiles.push(
      tile(
        "Verification",
        verification.passed === true ? "✓ passed" : verification.passed === false ? "✗ missed" : "not run",
        verification.summary,
      ),
    );
  }
  return h("section", { class: "tiles", "aria-label": "Headline" }, tiles);
}

function tile(label, value, sub) {
  return h("div", { class: "tile" }, h("div", { class: "tile-label" }, label), h("div", { class: "tile-value" }, value), sub ? h("div", { class: "tile-sub" }, sub) : null);
}

function infeasible(plan) {
  const relax = Object.entries(plan.relaxation || {});
  return notice(
    "error",
    h("strong", {}, "No fleet meets this request. "),
    h("ul", {}, (plan.infeasible_reasons || []).map((r) => h("li", {}, r))),
    relax.length ? h("p", {}, "What would make it feasible: ", relax.map(([k, v]) => `${k}: ${typeof v === "object" ? JSON.stringify(v) : v}`).join("; ")) : null,
  );
}

function warnings(plan) {
  const list = plan.warnings || [];
  return list.length ? notice("info", h("strong", {}, "Warnings"), h("ul", {}, list.map((w) => h("li", {}, w)))) : null;
}

function reports(id) {
  const formats = store.config.report_formats.length ? store.config.report_formats : Object.keys(FORMAT_LABELS);
  return h(
    "nav",
    { class: "card reports", "aria-label": "Reports" },
    h("strong", {}, "Procurement report: "),
    formats.map((f) =>
      h(
        "a",
        {
          href: `/plans/${id}/report?format=${f}`,
          class: "button small",
          target: f === "html" ? "_blank" : null,
          rel: f === "html" ? "noopener" : null,
          download: f === "html" ? null : `plan-${id.slice(0, 8)}.${f}`,
          "data-testid": `report-${f}`,
        },
        FORMAT_LABELS[f] || f,
      ),
    ),
  );
}

function poolsBlock(plan, colors, top = true) {
  const pools = plan.pools || [];
  if (!pools.length) {
    const why = plan.scenarios && plan.scenarios.length ? "A robust plan: each scenario has its pools (Scenarios above)." : "No pools: the plan has no fleet.";
    return h("p", { class: "empty" }, why);
  }
  const gpus = [...new Set(pools.map((p) => p.gpu))];
  const chart = stackedBars(
    pools.map((p) => ({
      label: `${p.class} ${p.role}`,
      segments: [{ value: p.gpus, color: colors[p.gpu] || "#888", title: `${p.id}: ${p.gpus} ${p.gpu} GPUs (${p.replicas} replicas × tp${p.tp}${p.pp > 1 ? ` × pp${p.pp}` : ""}), ${usd(p.cost_usd_per_hour)}/h` }],
      note: `${p.gpus} GPUs · ${usd(p.cost_usd_per_hour)}/h`,
    })),
    (x) => `${num(x)} GPUs`,
    { title: "GPUs per pool, coloured by GPU type", legend: gpus.map((g) => [g, colors[g] || "#888"]) },
  );
  return [
    chart,
    table(
      [
        { label: "Class", get: (p) => p.class },
        { label: "Role", get: (p) => p.role },
        { label: "GPU", get: (p) => gpuChip(p.gpu, colors) },
        { label: "Parallelism", get: (p) => `tp${p.tp}${p.pp > 1 ? ` pp${p.pp}` : ""}${p.ep > 1 ? ` ep${p.ep}` : ""}` },
        { label: "dtype", get: (p) => p.dtype + (p.kv_dtype && p.kv_dtype !== p.dtype ? ` (kv ${p.kv_dtype})` : "") },
        { label: "Replicas", num: true, get: (p) => num(p.replicas) },
        { label: "GPUs", num: true, get: (p) => num(p.gpus) },
        { label: "Rate req/s", num: true, get: (p) => num(p.rate_rps, 1) },
        { label: "Load", num: true, get: (p) => pct(p.utilization) },
        { label: "TTFT pred.", num: true, get: (p) => ms(p.predicted_ttft_ms) },
        { label: "TPOT pred.", num: true, get: (p) => ms(p.predicted_tpot_ms) },
        { label: "$/h", num: true, get: (p) => usd(p.cost_usd_per_hour) },
        { label: "Cost band", num: true, get: (p) => (p.cost_band_usd_per_hour ? `${usd(p.cost_band_usd_per_hour[0])}–${usd(p.cost_band_usd_per_hour[1])}` : "–") },
        {
          label: "Factors",
          get: (p) =>
            `${p.provenance || "–"} σ ${num(p.sigma_log, 2)}` +
            (p.derate_sigma_log != null && num(p.derate_sigma_log, 2) !== num(p.sigma_log, 2)
              ? ` (derate σ ${num(p.derate_sigma_log, 2)})`
              : ""),
        },
      ],
      pools,
      top ? { "data-testid": "plan-pools", "aria-labelledby": "pools-h" } : { "aria-label": "Pools of the scenario" },
    ),
  ];
}

function classesBlock(plan) {
  const classes = plan.classes || [];
  if (!classes.length) return h("p", { class: "empty" }, plan.scenarios && plan.scenarios.length ? "Per scenario, above." : "No classes.");
  const simulated = {};
  for (const v of (plan.verification && plan.verification.classes) || []) if (!v.scenario) simulated[v.name] = v;
  const rows = classes.map((c) => {
    const sim = simulated[c.name] || {};
    const items = [
      { name: "TTFT", value: c.ttft_ms, slo: c.slo && c.slo.ttft_ms, kind: "predicted" },
      sim.ttft_ms !== undefined && sim.ttft_ms !== null ? { name: "TTFT", value: sim.ttft_ms, slo: c.slo.ttft_ms, kind: "simulated" } : null,
      { name: "TPOT", value: c.tpot_ms, slo: c.slo && c.slo.tpot_ms, kind: "predicted" },
      sim.tpot_ms !== undefined && sim.tpot_ms !== null ? { name: "TPOT", value: sim.tpot_ms, slo: c.slo.tpot_ms, kind: "simulated" } : null,
    ].filter((x) => x && Number.isFinite(x.value) && x.slo);
    return { label: c.name, items };
  });
  return [
    rows.some((r) => r.items.length) ? sloChart(rows, { title: "Latency at the SLO percentile, as a share of the SLO" }) : null,
    table(
      [
        { label: "Class", get: (c) => c.name },
        { label: "Workload", get: (c) => c.workload },
        { label: "Mode", get: (c) => c.mode },
        { label: "Rate req/s", num: true, get: (c) => num(c.rate_rps, 1) },
        { label: "SLO (TTFT / TPOT)", get: (c) => (c.slo ? `p${c.slo.percentile} ${ms(c.slo.ttft_ms)} / ${ms(c.slo.tpot_ms)}` : "–") },
        { label: "Predicted", get: (c) => `${ms(c.ttft_ms)} / ${ms(c.tpot_ms)}` },
        {
          label: "Simulated",
          get: (c) => {
            const v = simulated[c.name];
            return v ? `${ms(v.ttft_ms)} / ${ms(v.tpot_ms)} · ${pct(v.attainment, 1)} met (${v.status})` : "not simulated";
          },
        },
        { label: "SLO met", get: (c) => (c.meets_slo ? "✓ yes" : "✗ no") },
        { label: "Prefix hits", num: true, get: (c) => pct(c.effective_prefix_hit_rate ?? c.prefix_hit_rate) },
        { label: "Why this mode", get: (c) => h("span", { "data-mode-reason": c.name }, c.mode_reason || "") },
      ],
      classes,
    ),
    (plan.assumed_notes || []).length
      ? h("div", { "data-testid": "plan-assumed" }, h("h3", {}, "Assumed"), h("ul", {}, plan.assumed_notes.map((line) => h("li", {}, line))))
      : null,
  ];
}

/** A robust plan: one fleet for every scenario; each scenario's own pools and classes. */
function scenariosBlock(plan, colors) {
  const scenarios = plan.scenarios;
  const counts = (m) => Object.entries(m || {}).map(([g, n]) => h("span", {}, gpuChip(g, colors), ` ×${n} `));
  return [
    h("p", {}, "One fleet is bought for every scenario; GPUs are re-assigned between pools per scenario. The premium is what serving all of them costs over the scenario's own cheapest fleet."),
    table(
      [
        { label: "Scenario", get: (x) => x.name },
        { label: "Weight", num: true, get: (x) => num(x.weight, 2) },
        { label: "Cheapest alone $/h", num: true, get: (x) => usd(x.cost_alone_usd_per_hour) },
        { label: "Premium $/h", num: true, get: (x) => usd(x.premium_usd_per_hour) },
        { label: "GPUs used", get: (x) => h("span", { class: "chips" }, counts(x.gpus_used)) },
        { label: "GPUs idle", get: (x) => h("span", { class: "chips" }, counts(x.gpus_idle)) },
      ],
      scenarios,
    ),
    scenarios.map((x) =>
      h(
        "details",
        {},
        h("summary", {}, `Scenario ${x.name}: pools and classes`),
        x.plan ? [poolsBlock(x.plan, colors, false), classesBlock(x.plan)] : h("p", { class: "empty" }, "No plan."),
      ),
    ),
  ];
}

/** The alternatives' table (next-cheapest fleets), or why there is none. */
function alternativesTable(alternatives) {
  return alternatives.length
    ? table(
        [
          { label: "Alternative", get: (a) => a.name },
          { label: "Status", get: (a) => a.status },
          { label: "$/h", num: true, get: (a) => usd(a.cost_usd_per_hour) },
          { label: "More than this plan", num: true, get: (a) => (a.delta_usd_per_hour === null || a.delta_usd_per_hour === undefined ? "–" : `+${usd(a.delta_usd_per_hour)}/h`) },
          { label: "Note", get: (a) => a.note || "" },
        ],
        alternatives,
      )
    : h("p", { class: "empty" }, "None computed.");
}

/** Alternatives solved after the plan (``alternatives_status: pending``): ask the API,
 * which solves them once however many ask, then fill the table and the classes' "why
 * this mode" cells. The space is held by a progress line meanwhile. */
function pendingAlternatives(id) {
  const host = h(
    "div",
    { "data-testid": "plan-alternatives", "aria-live": "polite" },
    h("p", { class: "muted" }, h("span", { class: "spinner", "aria-hidden": "true" }), " Solving the next-cheapest fleets (after the plan)…"),
  );
  get(`/plans/${encodeURIComponent(id)}/alternatives`)
    .then((res) => {
      mount(host, alternativesTable(res.alternatives || []));
      for (const [name, reason] of Object.entries(res.mode_reasons || {})) {
        for (const cell of document.querySelectorAll(`[data-mode-reason="${CSS.escape(name)}"]`)) {
          if (!cell.textContent) cell.textContent = reason;
        }
      }
    })
    .catch((err) => mount(host, notice("error", `Could not solve the alternatives: ${err.message}`)));
  return host;
}

function whyBlock(plan, colors, id) {
  const binding = plan.binding || [];
  const alternatives = plan.alternatives || [];
  const pending = plan.alternatives_status === "pending" && id;
  const whyNot = plan.why_not || [];
  return [
    h("h3", {}, "Binding limits"),
    binding.length ? h("ul", {}, binding.map((b) => h("li", {}, h("strong", {}, b.name), ": ", b.detail))) : h("p", { class: "empty" }, "No limit binds: the SLOs and prices alone shape this fleet."),
    h("h3", {}, "Alternatives (next-cheapest)"),
    pending ? pendingAlternatives(id) : h("div", { "data-testid": "plan-alternatives" }, alternativesTable(alternatives)),
    whyNot.length
      ? h(
          "details",
          {},
          h("summary", {}, `Why not the other GPUs (${whyNot.length})`),
          table(
            [
              { label: "Class", get: (w) => w.class },
              { label: "GPU", get: (w) => gpuChip(w.gpu, colors) },
              { label: "Reason", get: (w) => w.reason },
              { label: "Detail", get: (w) => w.detail },
            ],
            whyNot,
          ),
        )
      : null,
  ];
}

// True when every listed GPU is priced by analogy in FP4 pools only, on a level scaled to
// measurements (planner.report.borrowed.analogy_in_fp4_only).
function fp4Only(plan, gpus) {
  const pools = plan.pools || [];
  return gpus.every((g) => {
    const analogy = pools.filter((p) => p.gpu === g && p.provenance === "analogy");
    return analogy.length > 0 && analogy.every((p) => String(p.dtype || "").startsWith("fp4") && p.level_scale != null && p.level_scale !== 1);
  });
}

function uncertaintyBlock(plan, colors) {
  const risk = plan.risk || {};
  const unmeasured = plan.unmeasured_gpus || [];
  const used = Object.keys(plan.gpus_by_type || {});
  const gpus = (plan.assumptions && plan.assumptions.gpus) || {};
  return [
    h("p", {}, risk.confidence ? `Capacities are planned at ${pct(risk.confidence)} confidence: ` : "", risk.note || "", risk.hold_latency ? ". TTFT and TPOT SLOs are held at the same confidence (each GPU screened against each SLO x its capacity derate)." : ""),
    unmeasured.length
      ? notice("info", h("strong", {}, "Unmeasured GPUs in this fleet: "), unmeasured.map((g) => gpuChip(g, colors)), fp4Only(plan, unmeasured)
        ? " — no factors fitted in FP4: their level times the FP4 derates (see the warnings and assumptions), with a wider margin."
        : " — their efficiency is set by analogy, with a wider margin.")
      : used.length
        ? h("p", {}, "Every GPU type in this fleet has measured efficiency factors.")
        : null,
    used.length && Object.keys(gpus).length
      ? table(
          [
            { label: "GPU", get: (g) => gpuChip(g, colors) },
            { label: "$/h per GPU", num: true, get: (g) => (gpus[g] ? `${usd(gpus[g].price_usd_per_hour, 2)}${gpus[g].price_is_estimate ? " (estimate)" : ""}` : "–") },
            { label: "Prefill MFU", num: true, get: (g) => (gpus[g] ? num(gpus[g].prefill_mfu, 3) : "–") },
            { label: "Decode MBU", num: true, get: (g) => (gpus[g] ? num(gpus[g].decode_mbu, 3) : "–") },
            { label: "Provenance", get: (g) => (gpus[g] ? `${gpus[g].provenance}${gpus[g].points ? ` (${gpus[g].points} points)` : ""}` : "–") },
            { label: "σ log", num: true, get: (g) => (gpus[g] ? num(gpus[g].sigma_log, 2) : "–") },
          ],
          used,
        )
      : null,
  ];
}

function tcoBlock(tco) {
  const options = tco.options || [];
  return [
    h(
      "p",
      {},
      `Over ${tco.horizon_years} years (${tco.purchase}${tco.purchase !== "buy" ? `, ${tco.rent_term}` : ""}): ${usd(tco.total_usd)} — capex ${usd(tco.capex_usd)}, energy ${usd(tco.energy_usd)}, hosting ${usd(tco.hosting_usd)}, rent ${usd(tco.rent_usd)}; ${usd(tco.usd_per_million_output_tokens, 2)} per million output tokens.`,
    ),
    options.length
      ? stackedBars(
          options.map((o) => ({
            label: o.purchase,
            segments: [
              { value: o.capex_usd, color: "#2f6db5", title: `${o.purchase}: capex ${usd(o.capex_usd)}` },
              { value: o.energy_usd, color: "#c9a227", title: `${o.purchase}: energy ${usd(o.energy_usd)}` },
              { value: o.hosting_usd, color: "#8c6d4f", title: `${o.purchase}: hosting ${usd(o.hosting_usd)}` },
              { value: o.rent_usd, color: "#c44e52", title: `${o.purchase}: rent ${usd(o.rent_usd)}` },
              { value: o.operations_usd, color: "#6f6f6f", title: `${o.purchase}: operations ${usd(o.operations_usd)}` },
            ],
            note: o.available ? usd(o.total_usd) : "n/a",
          })),
          usd,
          {
            title: "Buy, rent or hybrid: total cost over the horizon",
            legend: [
              ["capex", "#2f6db5"],
              ["energy", "#c9a227"],
              ["hosting", "#8c6d4f"],
              ["rent", "#c44e52"],
              ["operations", "#6f6f6f"],
            ],
          },
        )
      : null,
  ];
}

function launchBlock(plan, id) {
  const pools = plan.pools || [];
  const targets = store.config.deployment_targets.length ? store.config.deployment_targets : ["dynamo", "llm-d", "compose"];
  const deployLinks = targets.flatMap((t) =>
    (t === "llm-d" ? ["vllm"] : ["vllm", "sglang"]).map((engine) =>
      h(
        "a",
        {
          class: "button small",
          href: `/plans/${id}/deployment?target=${t}&engine=${engine}`,
          download: `${t}-${engine}.yaml`,
          onclick: (e) => fetchDownload(e, deployNote),
        },
        `${t} (${engine})`,
      ),
    ),
  );
  const deployNote = h("div", { "aria-live": "polite" });
  return [
    pools.length ? h("p", {}, "Deployment files: ", deployLinks) : h("p", { class: "empty" }, "No fleet to deploy."),
    deployNote,
    pools.map((p) =>
      h(
        "details",
        { class: "launch" },
        h("summary", {}, `${p.id} — ${p.replicas} × ${p.gpu} tp${p.tp}`),
        launchCommands(p),
      ),
    ),
  ];
}

/** A command as shell lines: the program and its positional arguments, then one flag a line. */
function shellLines(args) {
  const lines = [];
  for (const arg of args) {
    if (arg.startsWith("-") || !lines.length) lines.push(arg);
    else if (lines.length === 1 || !lines[lines.length - 1].startsWith("-")) lines[lines.length - 1] += ` ${arg}`;
    else lines.push(arg);
  }
  return lines.map((l, i) => (i ? `  ${l}` : l)).join(" \\\n");
}

function copyButton(text) {
  const b = h("button", { type: "button", class: "small ghost" }, "Copy");
  b.addEventListener("click", async () => {
    try {
      await navigator.clipboard.writeText(text);
      b.textContent = "Copied";
    } catch {
      b.textContent = "Copy failed: select the text";
    }
  });
  return b;
}

/** Download a link's file through fetch, so an error (a compose file for a fleet
 * wider than one host: 422) is shown with the API's reason instead of saved. */
async function fetchDownload(event, note) {
  event.preventDefault();
  const link = event.currentTarget;
  mount(note);
  const response = await fetch(link.href);
  if (!response.ok) {
    let detail = `HTTP ${response.status}`;
    try {
      detail = (await response.json()).detail || detail;
    } catch {
      /* not the error body */
    }
    mount(note, notice("error", `${link.textContent}: ${detail}`));
    return;
  }
  const disposition = response.headers.get("Content-Disposition") || "";
  const named = disposition.match(/filename="([^"]+)"/);
  const url = URL.createObjectURL(await response.blob());
  const a = h("a", { href: url, download: named ? named[1] : link.getAttribute("download") });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 1000);
}

function launchCommands(p) {
  const launch = p.launch || {};
  const blocks = [];
  for (const engine of ["vllm", "sglang"]) {
    if (Array.isArray(launch[engine])) blocks.push(h("p", { class: "sublabel" }, engine, " ", copyButton(launch[engine].join(" "))), h("pre", {}, shellLines(launch[engine])));
  }
  for (const node of launch.per_node || []) {
    const lines = [`# node ${node.node_rank}`];
    for (const key of ["ray", "vllm", "sglang"]) {
      if (node[key] && node[key].length) lines.push(`# ${key}`, node[key].join(" "));
    }
    blocks.push(h("pre", {}, lines.join("\n")));
  }
  return blocks.length ? blocks : h("p", { class: "empty" }, "No launch command.");
}
