// The page's entry point: loads what every view needs (config, catalog), keeps the
// API key field, and shows the view the location hash names.

import { apiKey, get, setApiKey } from "./api.js";
import { h, mount, notice } from "./dom.js";
import { renderComposer } from "./composer.js";
import { renderPlan } from "./planview.js";
import { renderHistory } from "./history.js";
import { renderCompare, renderComparison } from "./whatif.js";
import { renderCatalog } from "./catalog.js";
import { store } from "./state.js";

async function loadShared() {
  const [config, gpus, models, workloads] = await Promise.all([
    get("/web/config"),
    get("/catalog/gpus"),
    get("/catalog/models"),
    get("/catalog/workloads"),
  ]);
  store.config = config;
  store.catalog = { gpus, models, workloads };
  document.getElementById("key-need").textContent = config.api_key_required ? "(required for writes)" : "(not required)";
}

const VIEWS = [
  [/^#\/plans\/([\w-]+)$/, "history", (el, m) => renderPlan(el, m[1])],
  [/^#\/history$/, "history", (el) => renderHistory(el)],
  [/^#\/compare$/, "compare", (el) => renderCompare(el)],
  [/^#\/comparisons\/([\w-]+)$/, "compare", (el, m, alive) => renderComparison(el, m[1], alive)],
  [/^#\/catalog$/, "catalog", (el) => renderCatalog(el)],
  [/^(#\/plan)?$|^#\/?$/, "plan", (el) => renderComposer(el)],
];

let current = 0;

async function route() {
  const view = document.getElementById("view");
  const hash = location.hash || "";
  const token = ++current;
  for (const [pattern, nav, render] of VIEWS) {
    const m = hash.match(pattern);
    if (!m) continue;
    for (const a of document.querySelectorAll("[data-nav]")) {
      if (a.dataset.nav === nav) a.setAttribute("aria-current", "page");
      else a.removeAttribute("aria-current");
    }
    view.replaceChildren();
    try {
      await render(view, m, () => token === current);
    } catch (err) {
      if (token === current) mount(view, notice("error", h("strong", {}, "Something failed: "), err.message));
    }
    return;
  }
  mount(view, notice("error", `No page at ${hash}. `, h("a", { href: "#/plan" }, "Plan a fleet")));
}

function keepKey() {
  const form = document.getElementById("key-form");
  const input = document.getElementById("api-key");
  input.value = apiKey();
  form.addEventListener("submit", (e) => {
    e.preventDefault();
    setApiKey(input.value.trim());
    form.querySelector("button").textContent = input.value.trim() ? "Kept" : "Keep";
  });
  input.addEventListener("change", () => setApiKey(input.value.trim()));
}

async function start() {
  keepKey();
  try {
    await loadShared();
  } catch (err) {
    mount(document.getElementById("view"), notice("error", `The service did not give its catalog: ${err.message}`));
    return;
  }
  window.addEventListener("hashchange", route);
  await route();
}

start();
