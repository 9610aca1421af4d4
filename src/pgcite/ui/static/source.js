// A citation's source, as the visitor's page and the inspector show it: the cited passage among
// its neighbours in its document, the document's dates, author, title and provenance, and for a
// scan the page image with the passage's block outlined. Plain JavaScript, no build step; text
// goes in with textContent only (never as HTML), so a passage cannot inject markup.
"use strict";

const PgciteSource = (() => {
  const SVG = "http://www.w3.org/2000/svg";

  function el(tag, cls, text) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    if (text !== undefined && text !== null) node.textContent = String(text);
    return node;
  }

  // `text` with the first occurrence of `quote` (ellipses and quotation marks stripped) marked.
  function marked(text, quote) {
    const p = el("p", "passage-text");
    const wanted = (quote || "").replace(/^[\s“"…]+|[\s”"…]+$/g, "").split(" … ")[0];
    const at = wanted.length > 8 ? text.indexOf(wanted) : -1;
    if (at < 0) { p.textContent = text; return p; }
    p.append(document.createTextNode(text.slice(0, at)), el("mark", null, wanted),
             document.createTextNode(text.slice(at + wanted.length)));
    return p;
  }

  function dates(start, end) {
    if (!start) return null;
    return end && end !== start ? start + " – " + end : start;
  }

  function facts(source, t) {
    const doc = source.document;
    const passage = source.passage;
    const dl = el("dl", "facts");
    const rows = [
      [t.date, dates(doc.date_start, doc.date_end)],
      [t.author, doc.author],
      [t.corpus, doc.corpus],
      [t.where, passage.locator],
      [t.source_file, doc.source],
      [t.ingested, doc.ingested_at ? doc.ingested_at.slice(0, 10) : null],
      [t.citation, passage.citation],
      [t.passage_id, passage.id],
    ];
    for (const [name, value] of Object.entries(doc.metadata || {})) {
      if (name !== "ocr" && (typeof value !== "object" || value === null)) rows.push([name, value]);
    }
    const ocr = (doc.metadata || {}).ocr;
    if (ocr && ocr.engine) rows.push([t.ocr, ocr.engine + (ocr.confidence != null ? " · " + ocr.confidence + "%" : "")]);
    for (const [name, value] of rows) {
      if (value === null || value === undefined || value === "") continue;
      dl.append(el("dt", null, name), el("dd", null, value));
    }
    return dl;
  }

  function passageItem(p, cls, label) {
    const li = el("li", cls);
    li.dataset.id = p.id;
    li.dataset.date = p.date_end || p.date_start || "";
    const head = el("p", "passage-head");
    if (label) head.append(el("strong", null, label + " · "));
    head.append(document.createTextNode([p.locator, dates(p.date_start, p.date_end)].filter(Boolean).join(" · ")));
    li.append(head);
    return li;
  }

  // The page image (fetched with the caller's key) with the passage's boxes outlined: an SVG
  // whose viewBox is the page OCR read, so the boxes need no scaling by hand.
  async function pageFigure(source, fetchImage, t) {
    const page = source.page;
    const figure = el("figure", "page");
    figure.dataset.testid = "page";
    const caption = el("figcaption", null, t.page + " " + page.page);
    if (!page.image) {
      figure.append(caption, el("p", "withheld", t.no_page + (page.withheld ? " (" + page.withheld + ")" : "")));
      return figure;
    }
    const blob = await fetchImage();
    const url = URL.createObjectURL(blob);
    const bitmap = await new Promise((resolve, reject) => {
      const img = new Image();
      img.onload = () => resolve(img);
      img.onerror = reject;
      img.src = url;
    });
    const width = page.width || bitmap.naturalWidth;
    const height = page.height || bitmap.naturalHeight;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", "0 0 " + width + " " + height);
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", t.page_alt.replace("{page}", page.page).replace("{title}", source.document.title || ""));
    const image = document.createElementNS(SVG, "image");
    image.setAttribute("href", url);
    image.setAttribute("width", width);
    image.setAttribute("height", height);
    svg.append(image);
    for (const [left, top, right, bottom] of page.boxes) {
      const rect = document.createElementNS(SVG, "rect");
      const pad = Math.round(Math.max(width, height) / 200);
      rect.setAttribute("x", left - pad);
      rect.setAttribute("y", top - pad);
      rect.setAttribute("width", right - left + 2 * pad);
      rect.setAttribute("height", bottom - top + 2 * pad);
      rect.setAttribute("class", "block");
      rect.dataset.testid = "block";
      svg.append(rect);
    }
    figure.append(svg, caption);
    return figure;
  }

  // Render `source` (the JSON of …/source) into `box`. `options.quote`: the words the answer
  // quoted, marked within the passage; `options.fetchImage`: a function returning the page
  // image as a Blob; `options.labels`: the page's words.
  async function render(box, source, options) {
    const t = options.labels;
    box.replaceChildren();
    const heading = el("h2", null, source.passage ? (source.document.title || source.passage.id) : t.removed_title);
    heading.id = "source-title";
    heading.tabIndex = -1;
    box.append(heading);
    const note = el("p", "note status-" + source.status, source.note);
    note.dataset.testid = "source-status";
    box.append(note);
    if (!source.passage) return heading;
    box.append(facts(source, t));
    const list = el("ol", "passages");
    list.setAttribute("aria-label", t.in_document);
    const neighbour = (p) => {
      const li = passageItem(p, "neighbour", null);
      li.append(el("p", "passage-text", p.body));
      return li;
    };
    list.append(...source.before.map(neighbour));
    const cited = passageItem(source.passage, "cited", t.quoted);
    cited.setAttribute("aria-current", "true");
    cited.dataset.testid = "cited-passage";
    cited.append(marked(source.passage.body, options.quote));
    list.append(cited);
    list.append(...source.after.map(neighbour));
    box.append(list);
    if (source.page) {
      try {
        box.append(await pageFigure(source, options.fetchImage, t));
      } catch (err) {
        box.append(el("p", "withheld", t.no_page + " (" + err.message + ")"));
      }
    }
    return heading;
  }

  return { render, el };
})();
