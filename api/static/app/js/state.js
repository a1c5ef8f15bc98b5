// What every view shares: config (GPU colours...), catalog lists, drafts.

export const store = {
  config: { gpu_colors: {}, api_key_required: false, report_formats: [], deployment_targets: [] },
  catalog: { gpus: [], models: [], workloads: [] },
  draft: null, // the composer's request document
  compareBase: null, // the base request of the next what-if
  compareFrom: null, // the plan id it came from
  compareDraft: null, // the what-if document being edited
};

/** Show the view at ``hash`` (re-rendering it when it is already shown). */
export function go(hash) {
  if (location.hash === hash) window.dispatchEvent(new HashChangeEvent("hashchange"));
  else location.hash = hash;
}

/** Split a field path ("traffic.classes[1].share") into keys ["traffic", "classes", 1, "share"]. */
export function pathKeys(path) {
  const keys = [];
  for (const part of path.split(".")) {
    const m = part.match(/^([^[\]]*)((?:\[\d+\])*)$/);
    if (!m) {
      keys.push(part);
      continue;
    }
    if (m[1]) keys.push(m[1]);
    for (const idx of m[2].matchAll(/\[(\d+)\]/g)) keys.push(Number(idx[1]));
  }
  return keys;
}

export function getPath(doc, path) {
  let node = doc;
  for (const k of pathKeys(path)) {
    if (node === null || typeof node !== "object") return undefined;
    node = node[k];
  }
  return node;
}

/** Set ``path`` in ``doc`` (creating objects); ``undefined`` deletes it and prunes
 * the objects it leaves empty. */
export function setPath(doc, path, value) {
  const keys = pathKeys(path);
  const trail = [doc];
  let node = doc;
  for (const k of keys.slice(0, -1)) {
    if (node[k] === null || typeof node[k] !== "object") {
      if (value === undefined) return;
      node[k] = {};
    }
    node = node[k];
    trail.push(node);
  }
  const last = keys[keys.length - 1];
  if (value === undefined) {
    delete node[last];
    for (let i = keys.length - 1; i > 0; i--) {
      const holder = trail[i - 1];
      const child = trail[i];
      if (!Array.isArray(child) && Object.keys(child).length === 0) delete holder[keys[i - 1]];
      else break;
    }
  } else {
    node[last] = value;
  }
}
