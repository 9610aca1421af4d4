// pgcite inspector: plain JavaScript, no build step. Every datum comes from the keyed JSON API;
// text is inserted with textContent only (never as HTML), so passages cannot inject markup.
"use strict";

const $ = (id) => document.getElementById(id);
const KEY = "pgcite.key";

function headers() {
  const key = sessionStorage.getItem(KEY);
  const h = { "Content-Type": "application/json" };
  if (key) h["Authorization"] = "Bearer " + key;
  return h;
}

function status(text, error) {
  $("status").textContent = text;
  $("status").className = error ? "error" : "";
}

async function api(method, path, body) {
  const resp = await fetch(path, { method, headers: headers(), body: body && JSON.stringify(body) });
  const data = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const detail = typeof data.detail === "string" ? data.detail : JSON.stringify(data.detail);
    const err = new Error((resp.status === 401 || resp.status === 403 ? "refused: " : "error: ")
                          + resp.status + " " + (detail || resp.statusText));
    err.status = resp.status;
    throw err;
  }
  return data;
}

function el(tag, cls, text) {
  const node = document.createElement(tag);
  if (cls) node.className = cls;
  if (text !== undefined && text !== null) node.textContent = String(text);
  return node;
}

// Words too common to be worth marking (English; other languages mark every word of 3+ letters).
const STOP = new Set(("the and for are was were with that this from have had not but his her its "
  + "they them their there then than what when where which who whom why how did does into out "
  + "about over under all any can could would should will shall our your you").split(" "));

function terms(query) {
  return (query.toLowerCase().match(/[\p{L}\p{N}]{3,}/gu) || []).filter((w) => !STOP.has(w));
}

// The passage text with the query's words marked (whole-word prefix match, case-insensitive).
function highlighted(text, words) {
  const p = el("p", "text");
  if (!words.length) { p.textContent = text; return p; }
  const escaped = words.map((w) => w.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"));
  const re = new RegExp("(" + escaped.join("|") + ")[\\p{L}\\p{N}]*", "giu");
  let last = 0;
  for (const m of text.matchAll(re)) {
    p.append(document.createTextNode(text.slice(last, m.index)));
    p.append(el("mark", null, m[0]));
    last = m.index + m[0].length;
  }
  p.append(document.createTextNode(text.slice(last)));
  return p;
}

function hitItem(hit, list, words, fusedIds, cited) {
  const li = el("li", "hit");
  li.id = list + "-" + hit.id;
  li.dataset.id = hit.id;
  li.dataset.date = hit.dateEnd || hit.date || "";
  if (list !== "fused" && !fusedIds.has(hit.id)) li.classList.add("dropped");
  if (cited.has(hit.id)) li.classList.add("cited");
  const head = el("div", "head");
  const rank = list === "keyword" ? hit.keywordRank : list === "vector" ? hit.vectorRank : hit.rank;
  head.append(el("span", "badge", "#" + rank), el("span", "id", "[" + hit.id + "]"));
  if (list === "keyword") head.append(el("span", null, "bm25 " + hit.keywordScore.toFixed(3)));
  if (list === "vector") head.append(el("span", null, "dist " + hit.distance.toFixed(3)));
  if (list === "fused") {
    head.append(el("span", null, "score " + hit.score.toFixed(4)),
                el("span", null, "kw #" + (hit.keywordRank ?? "–") + " · vec #" + (hit.vectorRank ?? "–")));
  }
  head.append(el("span", null, hit.date || "undated"));
  if (hit.corpus) head.append(el("span", null, "corpus " + hit.corpus));
  if (list !== "fused" && !fusedIds.has(hit.id)) head.append(el("span", "badge drop", "dropped by fusion"));
  const meta = el("div", "meta", hit.citation + " · ");
  meta.append(sourceLink(hit.id, "open the source"));
  li.append(head, highlighted(hit.text, words), meta);
  return li;
}

function renderLists(out, words) {
  const fusedIds = new Set(out.fused.map((h) => h.id));
  const cited = new Set(out.answer ? out.answer.citations : []);
  for (const list of ["keyword", "vector", "fused"]) {
    const ol = $(list);
    ol.replaceChildren(...out[list].map((h) => hitItem(h, list, words, fusedIds, cited)));
    if (!out[list].length) ol.append(el("li", "meta", "(none)"));
  }
}

// Where a citation opens its source (/ui/source): the passage in its document, under the
// query's cutoff and corpora, compared with the snapshot the lists came from.
let shown = { collection: "", snapshot: "", cutoff: "", corpora: [] };

function sourceLink(id, text) {
  const q = new URLSearchParams({ collection: shown.collection, id });
  if (shown.snapshot) q.set("snapshot", shown.snapshot);
  if (shown.cutoff) q.set("cutoff", shown.cutoff);
  for (const c of shown.corpora) q.append("corpora", c);
  const a = el("a", "source-link", text);
  a.href = "/ui/source?" + q;
  return a;
}

// The answer's text with each [id] a link to that passage in the fused list.
function renderAnswer(answer) {
  const box = $("answer-box");
  if (!answer) { box.hidden = true; return; }
  box.hidden = false;
  const p = $("answer");
  p.replaceChildren();
  const text = answer.answer;
  let last = 0;
  for (const m of text.matchAll(/\[([^\]\s]+)\]/g)) {
    p.append(document.createTextNode(text.slice(last, m.index)));
    const a = el("a", null, "[" + m[1] + "]");
    a.href = "#fused-" + m[1];
    a.dataset.cite = m[1];
    p.append(a);
    last = m.index + m[0].length;
  }
  p.append(document.createTextNode(text.slice(last)));
  $("answer-meta").textContent = (answer.abstained ? "abstained · " : "") + answer.generator
    + " · citations " + (answer.citations.join(", ") || "none")
    + " · sources " + answer.sources.map((s) => s.id).join(", ");
  const links = el("p", "meta", "Open a citation's source: ");
  for (const id of answer.citations) links.append(sourceLink(id, "[" + id + "]"), " ");
  $("answer-sources").replaceChildren(...(answer.citations.length ? [links] : []));
}

function renderTrace(out) {
  const rows = [];
  for (const s of out.stages) rows.push([s.stage, s.outcome, s.detail, s.ms.toFixed(1)]);
  for (const [k, v] of Object.entries(out.timings_ms)) rows.push(["timing", k, "", v.toFixed(1)]);
  if (out.answer) for (const t of out.answer.trace) rows.push(["answer", t.step, t.detail, ""]);
  $("trace").tBodies[0].replaceChildren(...rows.map((cells) => {
    const tr = el("tr");
    for (const c of cells) tr.append(el("td", null, c));
    return tr;
  }));
}

function renderSnapshots(snaps) {
  const box = $("snapshots");
  const table = el("table");
  const head = el("tr");
  for (const h of ["snapshot", "state", "active", "created", "chunks", "gate report"]) head.append(el("th", null, h));
  table.append(head);
  for (const s of snaps) {
    const tr = el("tr");
    const ev = s.evaluation;
    const report = ev ? Object.entries(ev.figures || {}).map(([k, v]) => k + " " + Number(v).toFixed(3)).join(", ")
      + " · cutoff violations " + ev.cutoff_violations
      + (ev.verdict ? " · verdict " + JSON.stringify(ev.verdict) : "") : "not evaluated";
    for (const c of [s.snapshotId, s.state, s.active ? "yes" : "", s.createdAt, s.chunks, report]) tr.append(el("td", null, c));
    table.append(tr);
  }
  box.replaceChildren(table);
}

async function loadSnapshots(name) {
  const select = $("snapshot");
  select.replaceChildren(el("option", null, "active"));
  select.options[0].value = "";
  try {
    const snaps = await api("GET", "/v1/collections/" + encodeURIComponent(name) + "/snapshots");
    for (const s of snaps) {
      const o = el("option", null, s.snapshotId + (s.active ? " (active)" : "") + " · " + s.state);
      o.value = s.snapshotId;
      select.append(o);
    }
    renderSnapshots(snaps);
  } catch (err) {
    $("snapshots").replaceChildren(el("p", "meta", "Snapshots and gate reports need an admin key (" + err.message + ")."));
  }
}

// Each key submitted starts a new load; an older load that answers late (the key-less one the page
// starts on opening, say) must not overwrite what the newer key was told.
let collectionsLoad = 0;

async function loadCollections() {
  const load = ++collectionsLoad;
  try {
    const cols = await api("GET", "/v1/collections");
    if (load !== collectionsLoad) return;
    const select = $("collection");
    select.replaceChildren(...cols.map((c) => { const o = el("option", null, c.name); o.value = c.name; return o; }));
    status(cols.length ? cols.length + " collection(s) visible to this key." : "No collection is visible to this key.");
    if (cols.length) await loadSnapshots(cols[0].name);
  } catch (err) {
    if (load !== collectionsLoad) return;
    $("collection").replaceChildren();
    status(err.message, true);
  }
}

async function inspect(event) {
  event.preventDefault();
  const name = $("collection").value;
  if (!name) { status("Pick a collection first.", true); return; }
  const body = {
    query: $("query").value, top_k: Number($("top-k").value) || 10, mode: $("mode").value,
    answer: $("with-answer").checked,
    filters: $("filters").value.split(";").map((s) => s.trim()).filter(Boolean),
  };
  if ($("snapshot").value) body.snapshot_id = Number($("snapshot").value);
  if ($("cutoff").value) body.cutoff = $("cutoff").value;
  const corpora = $("corpora").value.split(",").map((s) => s.trim()).filter(Boolean);
  if (corpora.length) body.corpora = corpora;
  status("Searching…");
  try {
    const out = await api("POST", "/ui/api/collections/" + encodeURIComponent(name) + "/inspect", body);
    shown = { collection: name, snapshot: String(out.snapshot_id), cutoff: body.cutoff || "",
              corpora: body.corpora || [] };
    renderLists(out, terms(body.query));
    renderAnswer(out.answer);
    renderTrace(out);
    status("Snapshot " + out.snapshot_id + " · " + out.fused.length + " fused, " + out.keyword.length
      + " keyword, " + out.vector.length + " vector candidates, " + out.dropped.length + " dropped by fusion.");
    document.body.dataset.ready = "1";
  } catch (err) {
    status(err.message, true);
  }
}

$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  const key = $("key").value.trim();
  if (key) sessionStorage.setItem(KEY, key); else sessionStorage.removeItem(KEY);
  loadCollections();
});
$("collection").addEventListener("change", () => loadSnapshots($("collection").value));
$("query-form").addEventListener("submit", inspect);
loadCollections();
