// The visitor's page: ask the exhibit, read the answer as it is written, open every citation's
// source. Plain JavaScript, no build step, nothing from another origin (the page's CSP says
// so). Text goes in with textContent only.
"use strict";

const $ = (id) => document.getElementById(id);
const el = PgciteSource.el;
const NAME = decodeURIComponent(location.pathname.split("/")[2] || "");
const BASE = "/exhibit/" + encodeURIComponent(NAME);
const API = "/v1/exhibits/" + encodeURIComponent(NAME);
const KEY = "pgcite.exhibit.key." + NAME;

// The page's own words; an exhibit's `labels` override them (docs/exhibits.md, "Labels").
const LABELS = {
  en: {
    skip: "Skip to the question", question: "Your question", ask: "Ask",
    hint: "Answers quote the archive, and every quote links to its source.",
    answer: "Answer", sources: "Sources", suggested: "Suggested questions",
    not_said: "The archive does not say.", back: "Back to the conversation",
    key: "Visitor key", use_key: "Use key", need_key: "This exhibit needs a visitor key.",
    asking: "Looking in the archive…", ready: "The answer is ready.", you_asked: "You asked:",
    open_source: "open the source", source_n: "Source {n}", date: "Date", author: "Author",
    corpus: "Collection", where: "Where", source_file: "From", ingested: "Archived",
    citation: "Cite as", passage_id: "Passage", ocr: "Read by", page: "Page",
    no_page: "No image of this page can be shown",
    page_alt: "Scan of page {page} of {title}, the quoted block outlined",
    quoted: "Quoted", in_document: "The passage in its document", removed_title: "Passage removed",
    error: "Something went wrong:", undated: "undated",
  },
  ar: {
    skip: "انتقل إلى السؤال", question: "سؤالك", ask: "اسأل",
    hint: "تقتبس الإجابات من الأرشيف، وكل اقتباس مرتبط بمصدره.",
    answer: "الإجابة", sources: "المصادر", suggested: "أسئلة مقترحة",
    not_said: "لا يذكر الأرشيف ذلك.", back: "العودة إلى المحادثة",
    key: "مفتاح الزائر", use_key: "استخدم المفتاح", need_key: "يحتاج هذا المعرض إلى مفتاح زائر.",
    asking: "نبحث في الأرشيف…", ready: "الإجابة جاهزة.", you_asked: "سألت:",
    open_source: "افتح المصدر", source_n: "المصدر {n}", date: "التاريخ", author: "الكاتب",
    corpus: "المجموعة", where: "الموضع", source_file: "من", ingested: "أُرشف",
    citation: "يُستشهد به", passage_id: "المقطع", ocr: "قُرئ بواسطة", page: "الصفحة",
    no_page: "لا يمكن عرض صورة هذه الصفحة",
    page_alt: "صورة الصفحة {page} من {title}، والمقطع المقتبس محدد",
    quoted: "المقتبس", in_document: "المقطع في وثيقته", removed_title: "حُذف المقطع",
    error: "حدث خطأ:", undated: "بلا تاريخ",
  },
};
let labels = LABELS.en;
let exhibit = null;
let lastCitation = null;  // the link that opened the source view, to return focus to

function status(text) { $("status").textContent = text; }

function key() { return sessionStorage.getItem(KEY); }

function headers(extra) {
  const h = Object.assign({}, extra || {});
  if (key()) h["Authorization"] = "Bearer " + key();
  return h;
}

async function api(path, init) {
  const resp = await fetch(API + path, Object.assign({}, init, { headers: headers((init || {}).headers) }));
  if (!resp.ok) {
    const data = await resp.json().catch(() => ({}));
    const err = new Error(resp.status + " " + (data.detail || resp.statusText));
    err.status = resp.status;
    throw err;
  }
  return resp;
}

// A key handed over in the address (/exhibit/NAME#key=pgc_…, for a kiosk): kept for this tab,
// then removed from the address so it is not shown or bookmarked.
function takeKeyFromAddress() {
  const match = location.hash.match(/key=([A-Za-z0-9_-]+)/);
  if (match) {
    sessionStorage.setItem(KEY, match[1]);
    history.replaceState(history.state, "", location.pathname + location.search);
  }
}

function applyLabels() {
  for (const node of document.querySelectorAll("[data-label]")) {
    const text = labels[node.dataset.label];
    if (text) node.textContent = text;
  }
}

function setUp(data) {
  exhibit = data;
  const lang = data.language.split("-")[0].toLowerCase();
  labels = Object.assign({}, LABELS.en, LABELS[lang] || {}, data.labels || {});
  document.documentElement.lang = data.language;
  document.documentElement.dir = data.direction;
  document.title = data.title;
  $("title").textContent = data.title;
  $("greeting").textContent = data.greeting || "";
  applyLabels();
  $("questions").replaceChildren(...data.questions.map((q) => {
    const li = el("li");
    const button = el("button", "suggestion", q);
    button.type = "button";
    button.addEventListener("click", () => { $("question").value = q; ask(q); });
    li.append(button);
    return li;
  }));
  $("suggested").hidden = !data.questions.length;
  $("key-form").hidden = true;
}

// The answer's text with each [id] as a numbered link to that citation's source; `numbers`
// maps ids to their numbers (first cited, first numbered).
function renderText(text, numbers, snapshot, linked) {
  const box = $("answer");
  box.replaceChildren();
  for (const line of text.split("\n")) {
    const p = el("p");
    let last = 0;
    for (const m of line.matchAll(/\[([^\[\]\s]+)\]/g)) {
      p.append(document.createTextNode(line.slice(last, m.index)));
      if (!numbers.has(m[1])) numbers.set(m[1], numbers.size + 1);
      const n = numbers.get(m[1]);
      if (linked) {
        const a = el("a", "cite", "[" + n + "]");
        a.href = sourceUrl(m[1], snapshot);
        a.dataset.cite = m[1];
        a.dataset.quote = quoteBefore(line, m.index);
        a.setAttribute("aria-label", labels.source_n.replace("{n}", n) + ", " + labels.open_source);
        p.append(a);
      } else {
        p.append(el("span", "cite", "[" + n + "]"));
      }
      last = m.index + m[0].length;
    }
    p.append(document.createTextNode(line.slice(last)));
    box.append(p);
  }
}

// The quoted words just before a citation: “…” on the same line, if the answer quotes.
function quoteBefore(line, index) {
  const open = line.lastIndexOf("“", index);
  const close = line.lastIndexOf("”", index);
  return open >= 0 && close > open ? line.slice(open + 1, close) : "";
}

function sourceUrl(id, snapshot) {
  return BASE + "/source?id=" + encodeURIComponent(id) + "&snapshot=" + snapshot;
}

function renderSources(answer, numbers) {
  const byId = new Map(answer.sources.map((s) => [s.id, s]));
  const items = [...numbers.entries()].filter(([id]) => byId.has(id)).map(([id, n]) => {
    const s = byId.get(id);
    const li = el("li");
    li.value = n;
    const a = el("a", null, [s.author, s.date || labels.undated, s.locator].filter(Boolean).join(" · "));
    a.href = sourceUrl(id, answer.snapshotId);
    a.dataset.cite = id;
    li.append(a);
    return li;
  });
  $("sources").replaceChildren(...items);
  $("sources-heading").hidden = !items.length;
}

// Server-sent events from a fetch body: yields [event, data] pairs.
async function* events(resp) {
  const reader = resp.body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += decoder.decode(value, { stream: true });
    let end;
    while ((end = buffer.indexOf("\n\n")) >= 0) {
      const frame = buffer.slice(0, end);
      buffer = buffer.slice(end + 2);
      const event = (frame.match(/^event: (.*)$/m) || [])[1];
      const data = (frame.match(/^data: (.*)$/m) || [])[1];
      if (event && data) yield [event, JSON.parse(data)];
    }
  }
}

async function ask(question) {
  question = question.trim();
  if (!question) return;
  showConversation(false);
  $("answer-box").hidden = false;
  $("asked").textContent = labels.you_asked + " " + question;
  $("not-said").hidden = true;
  $("sources").replaceChildren();
  $("answer").replaceChildren();
  $("answer").setAttribute("aria-busy", "true");
  $("ask").disabled = true;
  document.body.dataset.answered = "";
  status(labels.asking);
  let streamed = "";
  try {
    const resp = await api("/answer", {
      method: "POST", headers: { "Content-Type": "application/json" },
      body: JSON.stringify({ question, stream: true }),
    });
    for await (const [event, data] of events(resp)) {
      if (event === "delta") {
        streamed += data.text;
        renderText(streamed, new Map(), 0, false);
        document.body.dataset.streaming = "1";
      } else if (event === "final") {
        const answer = data.answer;
        const numbers = new Map();
        renderText(answer.answer, numbers, answer.snapshotId, true);
        renderSources(answer, numbers);
        $("not-said").hidden = !answer.abstained;
        document.body.dataset.answered = answer.abstained ? "abstained" : "cited";
        document.body.dataset.snapshot = answer.snapshotId;
      } else if (event === "error") {
        throw new Error(data.detail);
      }
    }
    status(labels.ready);
  } catch (err) {
    status(labels.error + " " + err.message);
    if (err.status === 401 || err.status === 403) needKey();
  } finally {
    $("answer").setAttribute("aria-busy", "false");
    $("ask").disabled = false;
  }
}

function showConversation(focus) {
  $("conversation").hidden = false;
  $("source-view").hidden = true;
  if (focus && lastCitation && document.contains(lastCitation)) lastCitation.focus();
}

async function openSource(id, snapshot, quote) {
  $("conversation").hidden = true;
  $("source-view").hidden = false;
  const body = $("source-body");
  body.replaceChildren(el("p", null, labels.asking));
  document.body.dataset.source = "";
  try {
    const query = "?id=" + encodeURIComponent(id) + (snapshot ? "&snapshot=" + snapshot : "");
    const source = await (await api("/source" + query)).json();
    const heading = await PgciteSource.render(body, source, {
      quote, labels,
      fetchImage: async () => (await api("/page?id=" + encodeURIComponent(id))).blob(),
    });
    heading.focus();
    document.body.dataset.source = source.status;
  } catch (err) {
    body.replaceChildren(el("p", "error", labels.error + " " + err.message));
    document.body.dataset.source = "error";
    if (err.status === 401 || err.status === 403) needKey();
  }
}

// What the address asks for: the conversation, or a citation's source.
function route() {
  const params = new URLSearchParams(location.search);
  if (location.pathname.endsWith("/source") && params.get("id")) {
    const state = history.state || {};
    openSource(params.get("id"), params.get("snapshot"), state.quote || "");
  } else {
    showConversation(true);
  }
}

function needKey() {
  $("key-form").hidden = false;
  status(labels.need_key);
}

async function start() {
  takeKeyFromAddress();
  try {
    setUp(await (await api("")).json());
  } catch (err) {
    // 404 with a key: a key of another exhibit gets an unknown exhibit's answer (the access rule)
    if (err.status === 401 || err.status === 403 || (err.status === 404 && key())) {
      needKey();
      return;
    }
    status(labels.error + " " + err.message);
    return;
  }
  document.body.dataset.ready = "1";
  route();
}

$("ask-form").addEventListener("submit", (event) => { event.preventDefault(); ask($("question").value); });
$("answer-box").addEventListener("click", (event) => {
  const a = event.target.closest("a[data-cite]");
  if (!a || event.ctrlKey || event.metaKey || event.shiftKey) return;
  event.preventDefault();
  lastCitation = a;
  const quote = a.dataset.quote || (document.querySelector("#answer a[data-cite='" + CSS.escape(a.dataset.cite) + "']") || {}).dataset?.quote || "";
  history.pushState({ quote }, "", a.getAttribute("href"));
  route();
});
$("back").addEventListener("click", () => {
  if (history.state && history.state.quote !== undefined) history.back();
  else { history.pushState({}, "", BASE); route(); }
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Escape" && !$("source-view").hidden) $("back").click();
});
window.addEventListener("popstate", route);
$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem(KEY, $("key").value.trim());
  start();
});
start();
