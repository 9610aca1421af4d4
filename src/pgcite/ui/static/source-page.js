// The inspector's view of one citation's source (/ui/source?collection=…&id=…&snapshot=…),
// read with the key the inspector stored for this tab, under the cutoff and corpora the query
// had (passed along in the address).
"use strict";

(async () => {
  const params = new URLSearchParams(location.search);
  const key = sessionStorage.getItem("pgcite.key");
  const headers = key ? { Authorization: "Bearer " + key } : {};
  const base = "/v1/collections/" + encodeURIComponent(params.get("collection") || "");
  const query = new URLSearchParams({ id: params.get("id") || "" });
  for (const name of ["snapshot", "cutoff"]) if (params.get(name)) query.set(name, params.get(name));
  for (const corpus of params.getAll("corpora")) query.append("corpora", corpus);
  const labels = {
    date: "Date", author: "Author", corpus: "Corpus", where: "Where", source_file: "From",
    ingested: "Ingested", citation: "Citation", passage_id: "Passage id", ocr: "OCR",
    page: "Page", no_page: "No page image can be shown", quoted: "Cited",
    page_alt: "Scan of page {page} of {title}, the cited block outlined",
    in_document: "The passage in its document", removed_title: "Passage removed",
  };
  const box = document.getElementById("source-body");
  try {
    const resp = await fetch(base + "/source?" + query, { headers });
    const data = await resp.json();
    if (!resp.ok) throw new Error(resp.status + " " + data.detail);
    const heading = await PgciteSource.render(box, data, {
      labels, quote: params.get("quote") || "",
      fetchImage: async () => {
        query.delete("neighbours");
        const page = await fetch(base + "/page?" + query, { headers });
        if (!page.ok) throw new Error(page.status + " " + page.statusText);
        return page.blob();
      },
    });
    heading.focus();
    document.body.dataset.source = data.status;
  } catch (err) {
    document.getElementById("status").textContent = "error: " + err.message;
    document.body.dataset.source = "error";
  }
})();
