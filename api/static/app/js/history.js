// Stored plans and comparisons (GET /plans, GET /comparisons): filter, open, re-plan,
// delete, and two plans side by side.

import { ApiError, del, get, query } from "./api.js";
import { gpuChip, h, mount, notice, num, table, usd, when } from "./dom.js";
import { loadDraft } from "./composer.js";
import { go, store } from "./state.js";

const PAGE = 20;

export async function renderHistory(el) {
  const filters = { model: "", status: "", text: "", variants: false };
  let searchTimer = null;
  const selected = new Set();
  let cursor = null;
  let cursors = [];
  const plansHost = h("div", { class: "list-host" });
  const compHost = h("div", { class: "list-host" });
  const diffHost = h("div", { "aria-live": "polite" });

  const modelSel = h(
    "select",
    { id: "f-model", onchange: () => { filters.model = modelSel.value; cursors = []; cursor = null; loadPlans(); } },
    h("option", { value: "" }, "any model"),
    store.catalog.models.map((m) => h("option", { value: m.id }, m.id)),
  );
  const statusSel = h(
    "select",
    { id: "f-status", onchange: () => { filters.status = statusSel.value; cursors = []; cursor = null; loadPlans(); } },
    h("option", { value: "" }, "any status"),
    ["optimal", "feasible", "infeasible"].map((s) => h("option", { value: s }, s)),
  );
  const compStatus = h(
    "select",
    { id: "f-cstatus", onchange: () => loadComparisons() },
    h("option", { value: "" }, "any status"),
    ["running", "done", "failed"].map((x) => h("option", { value: x }, x)),
  );
  const restart = () => { cursors = []; cursor = null; loadPlans(); };
  // the API searches every stored plan (a part of the name, or the start of the id)
  const textIn = h("input", {
    id: "f-text",
    type: "search",
    maxlength: 100,
    placeholder: "part of a name, or an id",
    oninput: () => {
      clearTimeout(searchTimer);
      searchTimer = setTimeout(() => { filters.text = textIn.value.trim(); restart(); }, 300);
    },
  });
  const variantsBox = h("input", {
    id: "f-variants",
    type: "checkbox",
    checked: filters.variants,
    onchange: () => { filters.variants = variantsBox.checked; restart(); },
  });
  let lastPage = null;

  async function loadPlans() {
    mount(plansHost, h("p", { class: "muted" }, h("span", { class: "spinner", "aria-hidden": "true" }), " Loading…"));
    try {
      const params = { limit: PAGE, model: filters.model, status: filters.status, search: filters.text, cursor };
      if (!filters.variants) params.variants = "false";
      lastPage = await get(`/plans${query(params)}`);
      renderPlans(lastPage);
    } catch (err) {
      mount(plansHost, notice("error", `Could not list the plans: ${err.message}`));
    }
  }

  const compareButton = h("button", { type: "button", class: "small", onclick: showDiff }, "Compare the 2 ticked side by side");
  const syncCompare = () => {
    compareButton.disabled = selected.size !== 2;
    compareButton.textContent = selected.size === 2 ? "Compare the 2 ticked side by side" : `Tick 2 plans to compare (${selected.size} ticked)`;
  };

  function renderPlans(page) {
    if (!page) return;
    syncCompare();
    const items = page.items;
    const filtered = filters.model || filters.status || filters.text;
    const pager = h(
      "div",
      { class: "row" },
      h("span", { class: "muted" }, `${page.total} plan${page.total === 1 ? "" : "s"} stored${filtered ? " matching" : ""}${filters.variants ? "" : " (what-if variants hidden)"}`),
      h("button", { type: "button", class: "small", disabled: !cursors.length, onclick: () => { cursor = cursors.pop() || null; loadPlans(); } }, "Newer"),
      h("button", { type: "button", class: "small", disabled: !page.next_cursor, onclick: () => { cursors.push(cursor); cursor = page.next_cursor; loadPlans(); } }, "Older"),
      compareButton,
    );
    if (!items.length) {
      mount(plansHost, pager, h("p", { class: "empty" }, filtered ? "No stored plan matches." : "No plans yet. ", filtered ? null : h("a", { href: "#/plan" }, "Plan a fleet")));
      return;
    }
    mount(
      plansHost,
      pager,
      table(
        [
          {
            label: "Pick",
            get: (p) => {
              const box = h("input", {
                type: "checkbox",
                "aria-label": `Pick ${p.name || p.id} for the side-by-side`,
                checked: selected.has(p.id),
                onchange: () => {
                  if (box.checked) selected.add(p.id);
                  else selected.delete(p.id);
                  syncCompare(); // no re-render: the focus stays on the box
                },
              });
              return box;
            },
          },
          {
            label: "Name",
            get: (p) =>
              h(
                "span",
                {},
                h("a", { href: `#/plans/${p.id}` }, p.name || "(unnamed)"),
                p.comparison_id
                  ? h("span", { class: "muted" }, " · variant ", h("a", { href: `#/comparisons/${p.comparison_id}` }, p.variant_name || "of a what-if"))
                  : null,
              ),
          },
          { label: "Id", get: (p) => h("code", { title: p.id }, p.id.slice(0, 8)) },
          { label: "Model", get: (p) => p.model },
          { label: "Status", get: (p) => h("span", { class: `status ${p.status}` }, p.status) },
          { label: "$/h", num: true, get: (p) => usd(p.cost_usd_per_hour) },
          { label: "GPUs", num: true, get: (p) => num(p.gpus_total) },
          { label: "Created", get: (p) => when(p.created_at) },
          {
            label: "Actions",
            get: (p) =>
              h(
                "span",
                { class: "row" },
                h("button", { type: "button", class: "small", onclick: () => replan(p.id) }, "Re-plan with edits"),
                p.comparison_id
                  ? h("button", { type: "button", class: "small danger", disabled: true, title: "A what-if's variant: delete its comparison instead" }, "Delete")
                  : h("button", { type: "button", class: "small danger", "aria-label": `Delete ${p.name || p.id}`, onclick: (e) => remove(e.target, `/plans/${p.id}`, loadPlans) }, "Delete"),
              ),
          },
        ],
        items,
        { "aria-label": "Stored plans" },
      ),
    );
  }

  async function replan(id) {
    const record = await get(`/plans/${encodeURIComponent(id)}`);
    loadDraft(record.request);
    go("#/plan");
  }

  async function showDiff() {
    const [a, b] = await Promise.all([...selected].map((id) => get(`/plans/${encodeURIComponent(id)}`)));
    mount(diffHost, planDiff(a, b));
    diffHost.scrollIntoView({ block: "start" });
  }

  async function loadComparisons() {
    try {
      const page = await get(`/comparisons${query({ limit: PAGE, status: compStatus.value })}`);
      if (!page.items.length) {
        const none = compStatus.value ? `No ${compStatus.value} comparison.` : "No comparisons yet. ";
        mount(compHost, h("p", { class: "empty" }, none, h("a", { href: "#/compare" }, "Ask a what-if")));
        return;
      }
      mount(
        compHost,
        table(
          [
            { label: "Name", get: (c) => h("a", { href: `#/comparisons/${c.id}` }, c.name || c.id.slice(0, 8)) },
            { label: "Status", get: (c) => h("span", { class: `status ${c.status}` }, c.status) },
            { label: "Variants", num: true, get: (c) => `${c.done}/${c.total}` },
            { label: "Created", get: (c) => when(c.created_at) },
            { label: "Actions", get: (c) => h("button", { type: "button", class: "small danger", "aria-label": `Delete comparison ${c.name || c.id}`, onclick: (e) => remove(e.target, `/comparisons/${c.id}`, loadComparisons) }, "Delete") },
          ],
          page.items,
          { "aria-label": "Stored comparisons" },
        ),
      );
    } catch (err) {
      mount(compHost, notice("error", `Could not list the comparisons: ${err.message}`));
    }
  }

  mount(
    el,
    h("div", { class: "page-head" }, h("h1", {}, "History")),
    h(
      "section",
      { class: "card", "aria-labelledby": "plans-h" },
      h("h2", { id: "plans-h" }, "Plans"),
      h(
        "div",
        { class: "row filters" },
        h("label", { for: "f-model" }, "Model"),
        modelSel,
        h("label", { for: "f-status" }, "Status"),
        statusSel,
        h("label", { for: "f-text" }, "Search"),
        textIn,
        h("label", { for: "f-variants", class: "check-item" }, variantsBox, " show what-if variants"),
      ),
      plansHost,
    ),
    diffHost,
    h(
      "section",
      { class: "card", "aria-labelledby": "comps-h" },
      h("h2", { id: "comps-h" }, "What-if comparisons"),
      h("div", { class: "row filters" }, h("label", { for: "f-cstatus" }, "Status"), compStatus),
      compHost,
    ),
  );
  await Promise.all([loadPlans(), loadComparisons()]);
}

async function remove(button, path, reload) {
  if (!confirm("Delete it? This cannot be undone.")) return;
  button.disabled = true;
  try {
    await del(path);
    reload();
  } catch (err) {
    button.disabled = false;
    const hint = err instanceof ApiError && err.status === 401 ? "Enter the API key at the top right. " : "";
    button.after(notice("error", hint, err.message));
  }
}

/** Two plans side by side: headline numbers, GPUs by type, pools. */
export function planDiff(a, b) {
  const colors = store.config.gpu_colors;
  const pa = a.plan || {};
  const pb = b.plan || {};
  const gpuTypes = [...new Set([...Object.keys(pa.gpus_by_type || {}), ...Object.keys(pb.gpus_by_type || {})])];
  const delta = (x, y, fmt) => (Number.isFinite(x) && Number.isFinite(y) ? `${y - x >= 0 ? "+" : "−"}${fmt(Math.abs(y - x))}` : "–");
  const rows = [
    ["Status", a.status, b.status, ""],
    ["Cost $/h", usd(pa.cost_usd_per_hour), usd(pb.cost_usd_per_hour), delta(pa.cost_usd_per_hour, pb.cost_usd_per_hour, usd)],
    ["Total with operations $/h", usd(pa.total_cost_usd_per_hour), usd(pb.total_cost_usd_per_hour), delta(pa.total_cost_usd_per_hour, pb.total_cost_usd_per_hour, usd)],
    ["GPUs", num(pa.gpus_total), num(pb.gpus_total), delta(pa.gpus_total, pb.gpus_total, num)],
    ["Power kW", num(pa.power_kw, 1), num(pb.power_kw, 1), delta(pa.power_kw, pb.power_kw, (x) => num(x, 1))],
    ...gpuTypes.map((g) => [
      gpuChip(g, colors),
      num((pa.gpus_by_type || {})[g] || 0),
      num((pb.gpus_by_type || {})[g] || 0),
      delta((pa.gpus_by_type || {})[g] || 0, (pb.gpus_by_type || {})[g] || 0, num),
    ]),
  ];
  const label = (r) => `${r.name || "plan"} · ${r.id.slice(0, 8)}`;
  const poolList = (p) =>
    h(
      "ul",
      { class: "pool-list" },
      (p.pools || []).map((x) => h("li", {}, gpuChip(x.gpu, colors), ` ${x.class} ${x.role}: ${x.replicas} × tp${x.tp} ${x.dtype} = ${x.gpus} GPUs, ${usd(x.cost_usd_per_hour)}/h`)),
    );
  return h(
    "section",
    { class: "card", "aria-labelledby": "diff-h" },
    h("h2", { id: "diff-h" }, "Side by side"),
    table(
      [
        { label: "", get: (r) => r[0] },
        { label: label(a), num: true, get: (r) => r[1] },
        { label: label(b), num: true, get: (r) => r[2] },
        { label: "Difference (right − left)", num: true, get: (r) => r[3] },
      ],
      rows,
      { "data-testid": "plan-diff" },
    ),
    h(
      "div",
      { class: "two-col" },
      h("div", {}, h("h3", {}, `Pools: ${label(a)}`), poolList(pa)),
      h("div", {}, h("h3", {}, `Pools: ${label(b)}`), poolList(pb)),
    ),
  );
}
