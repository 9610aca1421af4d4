"""OCR, four ways, all variants side by side in one run:

- **cer**: Pepys diary text rendered as scans at several type sizes and resolutions (and a
  degraded scan), read back through the ingest loader, scored by character error rate.
- **layout**: a small scanned archive (an inventory, two-column letters in a PDF without a text
  layer, a multi-page TIFF register, a blank verso) ingested twice -- one passage per Tesseract
  block (as before) and one per page region (now) -- and asked questions whose answers are
  known: does the top hit hold the answer, does the cited answer say it, from the right page.
- **blank**: the blank-page check (``_ocr.is_blank``) on every page the other sections make and
  on blank scans (white, speckled, shaded): the measured margin behind ``BLANK_RANGE``.
- **hostile**: scans built to cost (400 blank pages in a 0.4 MB PDF; a TIFF of six 108 MP
  frames in ~0.1 MB; a 144 MP PNG bomb) read in a fresh process each, timed, with peak memory
  of the process and of Tesseract: the code before this work (``--before``, default the merge
  base with main), this code with the limits and the blank check off, and the defaults.

    python bench/ocr.py                                   # writes bench/results/ocr/
    python bench/ocr.py --sections layout,hostile --blank-pages 100
"""

from __future__ import annotations

import argparse
import io
import json
import os
import platform
import re
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any

from _common import DATA, RESULTS, client
from PIL import Image, ImageDraw

import pgcite
from pgcite._types import Document
from pgcite.evaluate import _scans
from pgcite.evaluate._cer import character_error_rate
from pgcite.evaluate._collection import git_commit
from pgcite.ingest import _ocr
from pgcite.ingest._loaders import iter_documents

ROOT = Path(__file__).resolve().parent.parent
OUT = RESULTS / "ocr"
SECTIONS = ("cer", "layout", "blank", "hostile")


# --- cer -------------------------------------------------------------------------------------

# (type size in points, scan resolution in dpi, container, degraded): the loader's two OCR
# paths; clean prints down to where Tesseract starts to fail, and a degraded scan (blurred,
# speckled, tilted) like an old register's.
CER_VARIANTS = [(14, 150, "png", False), (11, 150, "png", False), (8, 150, "png", False),
                (11, 300, "png", False), (8, 300, "png", False), (8, 100, "png", False),
                (6, 100, "png", False), (11, 150, "pdf", False), (11, 150, "png", True),
                (8, 150, "png", True)]


def passages(n: int) -> list[str]:
    """The first ``n`` Pepys entries of 400+ characters, cut at a word to ~600 characters."""
    out: list[str] = []
    for line in (DATA / "pepys-diary" / "entries.jsonl").read_text().splitlines():
        text = " ".join(json.loads(line)["text"].split())
        if len(text) >= 400:
            out.append(text[:600].rsplit(" ", 1)[0])
        if len(out) == n:
            break
    return out


def cer_pages(texts: list[str], points: int, dpi: int, degraded: bool) -> list[Image.Image]:
    layout = _scans.Layout(height_in=5.5, dpi=dpi, points=points)
    images = [_scans.page([_scans.paragraph(t)], layout) for t in texts]
    return [_scans.degrade(i, seed) for seed, i in enumerate(images)] if degraded else images


def run_cer_variant(texts: list[str], points: int, dpi: int, kind: str, degraded: bool,
                    tmp: Path) -> dict[str, Any]:
    images = cer_pages(texts, points, dpi, degraded)
    paths = []
    if kind == "pdf":
        paths.append(_scans.save_pdf(tmp / f"scan-{points}pt-{dpi}dpi-{degraded}.pdf", images,
                                     dpi))
    else:
        for i, image in enumerate(images, start=1):
            paths.append(tmp / f"scan-{points}pt-{dpi}dpi-{degraded}-{i}.png")
            image.save(paths[-1], dpi=(dpi, dpi))
    started = time.perf_counter()
    items = list(iter_documents(paths))  # one per file, in order: a Document or its LoadError
    seconds = time.perf_counter() - started
    docs = [d for d in items if isinstance(d, Document)]
    failed = [i.reason for i in items if not isinstance(i, Document)]
    if kind == "pdf":  # one document; its units carry their page
        units = [u for d in docs for u in d.units]
        pages = [[u.text for u in units if u.metadata["ocr"]["page"] == p]
                 for p in range(1, len(texts) + 1)]
    else:  # a file that failed (no text recognised) read as nothing
        pages = [[u.text for u in d.units] if isinstance(d, Document) else [] for d in items]
    cers = [round(character_error_rate(t, "\n".join(p)), 4)
            for t, p in zip(texts, pages, strict=True)]
    confs = [p.confidence for d in docs for p in d.ocr_pages]
    label = f"{points} pt @ {dpi} dpi ({kind}{', degraded' if degraded else ''})"
    return {"variant": label, "pages": len(texts), "cer_per_page": cers,
            "cer_mean": round(statistics.fmean(cers), 4), "confidence_per_page": confs,
            "low_confidence_pages": sum(c is None or c < _ocr.LOW_CONFIDENCE for c in confs),
            "files_failed": failed, "seconds_per_page": round(seconds / len(texts), 2)}


def cer(n_pages: int) -> list[dict[str, Any]]:
    texts = passages(n_pages)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for points, dpi, kind, degraded in CER_VARIANTS:
            rows.append(run_cer_variant(texts, points, dpi, kind, degraded, Path(tmp)))
            print(rows[-1], file=sys.stderr)
    return rows


# --- layout ----------------------------------------------------------------------------------

H, P, items = _scans.heading, _scans.paragraph, _scans.items
LETTER = _scans.Layout(height_in=11)


def archive(folder: Path) -> None:
    """The scanned archive the layout questions are asked of (no text layer anywhere)."""
    _scans.page([
        H("Inventory of instruments lent by J. Hartley to the Philosophical Society"),
        *items("One brass telescope, three feet long, with its tripod",
               "A theodolite by Troughton, with its stand", "Two barometers in oak cases",
               "A set of drawing compasses", "The large celestial globe"),
        P("The above were received back in good order on the tenth of May, and the keeper "
          "of the rooms signed for them."),
    ], LETTER).save(folder / "inventory.png")
    letters = _scans.two_columns([H("Correspondence of the Society, spring 1851")], [
        H("Letter from J. Hartley"),
        P("Dear Sir, I write to say that the instruments reached the observatory on Tuesday, "
          "packed in straw and sawdust, and not one lens was cracked on the road."),
        P("The carrier from Leeds asked four shillings for the journey, which I paid him out "
          "of my own purse and beg the Society to repay."),
        H("On the weather"),
        P("It rained for nine days without stopping, and the river rose over the lower "
          "meadow, so that no observation could be made before the twentieth."),
    ], [
        H("Reply from the Secretary"),
        P("The Secretary thanks Mr Hartley for his letter and asks that the globe be "
          "returned before the winter meeting, when the members wish to see it."),
        P("The council voted to repay the carrier's fee and to record the loan in its "
          "minutes, with the thanks of the Society."),
    ], LETTER)
    accounts = _scans.page([
        H("Accounts of the carriage, June 1851"),
        *items("Carrier from Leeds, four shillings", "Straw and sawdust for packing, sixpence",
               "Lamp oil for the observatory, one shilling", "A new lock for the instrument "
               "case, two shillings"),
        P("Paid by the treasurer, Mr Edward Baines, on the first of June."),
    ], LETTER)
    blank = Image.new("L", LETTER.size, 255)
    _scans.save_pdf(folder / "letters.pdf", [letters, blank, accounts], LETTER.dpi)
    minutes = _scans.page([
        H("Minutes of the council, 3 March 1851"),
        P("The council met in the library at seven in the evening. The minutes of the last "
          "meeting were read and approved."),
        P("It was resolved that the Society's instruments be lent to Mr Hartley for the "
          "observation of the spring comet, on condition that he return them in good order."),
    ], LETTER)
    present = _scans.page([
        H("Members present at the council"),
        *items("The Reverend William Turner, in the chair", "Mr Edward Baines, treasurer",
               "Dr Charles Thackrah", "Mr John Atkinson, secretary"),
        P("The meeting closed at nine."),
    ], LETTER)
    minutes.save(folder / "register.tif", save_all=True, append_images=[present],
                 compression="tiff_deflate")


# (question, gold strings, the file and page that answer it)
QUESTIONS: list[tuple[str, list[str], str, int]] = [
    ("What instruments did Hartley lend?",
     ["telescope", "theodolite", "barometers", "compasses", "globe"], "inventory.png", 1),
    ("When were the lent instruments received back?", ["tenth of May"], "inventory.png", 1),
    ("How much did the carrier from Leeds ask?", ["four shillings"], "letters.pdf", 1),
    ("What did the packing cost?", ["sixpence"], "letters.pdf", 3),
    ("Who paid the accounts of the carriage?", ["Edward Baines"], "letters.pdf", 3),
    ("What does the Secretary ask Hartley to return?", ["globe"], "letters.pdf", 1),
    ("Why could no observation be made before the twentieth?", ["rained", "river"],
     "letters.pdf", 1),
    ("Who was present at the council?", ["William Turner", "Edward Baines", "Thackrah",
                                         "John Atkinson"], "register.tif", 2),
    ("On what condition were the instruments lent to Hartley?", ["good order"],
     "register.tif", 1),
]


@contextmanager
def per_block() -> Iterator[None]:
    """The reading before regions: one passage per Tesseract block, no column split."""
    real_order, real_regions = _ocr.reading_order, _ocr.regions

    def blocks(paragraphs: Any) -> list[_ocr.Region]:
        out: list[_ocr.Region] = []
        for paragraph in paragraphs:
            if out and out[-1].paragraphs[-1].block == paragraph.block:
                out[-1].paragraphs.append(paragraph)
                out[-1].joins.append("\n")
            else:
                out.append(_ocr.Region([paragraph]))
        return out

    def tesseract_order(paragraphs: list[_ocr.Paragraph], body: float, *,
                        rtl: bool = False) -> list[_ocr.Paragraph]:
        return paragraphs

    _ocr.reading_order = tesseract_order
    _ocr.regions = blocks  # type: ignore[assignment]
    try:
        yield
    finally:
        _ocr.reading_order, _ocr.regions = real_order, real_regions  # type: ignore[assignment]


def _page(locator: str | None) -> int | None:
    """The page a locator names (``p. 3``)."""
    match = re.match(r"p\. (\d+)", locator or "")
    return int(match[1]) if match else None


def ask(col: pgcite.Collection) -> dict[str, Any]:
    rows: list[dict[str, Any]] = []
    for question, gold, source, page in QUESTIONS:
        top = col.search(question, top_k=5).hits
        first = top[0] if top else None
        answer = col.answer(question)
        said = answer.answer.lower() if not answer.abstained else ""
        cited = {(s.source, _page(s.locator)) for s in answer.sources
                 if s.id in answer.citations}
        share = [sum(g.lower() in hit.body.lower() for g in gold) / len(gold) for hit in top]
        rows.append({
            "question": question,
            "best_passage_gold_share": round(max(share, default=0.0), 3),
            "top1_has_answer": first is not None and any(g.lower() in first.body.lower()
                                                         for g in gold),
            "top1_right_page": first is not None and (first.source, _page(first.locator)) == (
                source, page),
            "answer_gold_share": round(sum(g.lower() in said for g in gold) / len(gold), 3),
            "answer_cites_right_page": (source, page) in cited,
            "abstained": answer.abstained,
        })
        print(f"{question} -> {answer.answer[:300]!r}", file=sys.stderr)  # not a summary's
    return {"questions": len(rows),
            **{k: round(statistics.fmean(float(r[k]) for r in rows), 3) for k in (
                "top1_has_answer", "top1_right_page", "best_passage_gold_share",
                "answer_gold_share",
                "answer_cites_right_page", "abstained")},
            "rows": rows}


def layout() -> dict[str, Any]:
    out: dict[str, Any] = {}
    c = client()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / "archive"
        folder.mkdir()
        archive(folder)
        for name, reading in (("per block (before)", per_block), ("per region (now)", None)):
            label = "ocr_layout_" + ("block" if reading else "region")
            with suppress(pgcite.CollectionNotFound):
                c.drop_collection(label)
            col = c.create_collection(label)
            with reading() if reading else nullcontext():
                report = col.ingest([folder])
            assert not report.failed, report.failed
            out[name] = {"passages": report.chunks_added, "ocr_pages": report.ocr_pages,
                         "flagged_pages": len(report.low_confidence), **ask(col)}
            print(name, {k: v for k, v in out[name].items() if k != "rows"}, file=sys.stderr)
    return out




# --- blank check -----------------------------------------------------------------------------


def blank(texts: list[str]) -> dict[str, Any]:
    """The check's statistic on text pages (every CER variant, the layout archive's pages) and
    on blank and near-blank scans, and what the check costs against a Tesseract run."""
    import random

    text_pages: dict[str, float] = {}
    for points, dpi, _, degraded in CER_VARIANTS:
        for i, image in enumerate(cer_pages(texts, points, dpi, degraded), start=1):
            text_pages[f"{points} pt @ {dpi} dpi{' degraded' if degraded else ''} p{i}"] = (
                _ocr.ink_range(image))
    layout = _scans.Layout(height_in=11, dpi=300)
    lone = {"one word, 8 pt": ("Finis", 0, 8), "page number, 8 pt": ("12", 0, 8),
            "one letter, 6 pt": ("I", 0, 6), "faint word, grey 200": ("note", 200, 11)}
    for label, (word, shade, points) in lone.items():
        image = Image.new("L", layout.size, 255)
        ImageDraw.Draw(image).text((1200, 3000), word, fill=shade,
                                   font=_scans.font(layout.px(points)))
        text_pages[label] = _ocr.ink_range(image)
    rng = random.Random(7)

    def speckled(share: float) -> Image.Image:
        image = Image.new("L", layout.size, 255)
        for _ in range(int(image.width * image.height * share)):
            image.putpixel((rng.randrange(image.width), rng.randrange(image.height)),
                           rng.choice((0, 255)))
        return image

    shaded = Image.linear_gradient("L").resize(layout.size).point(lambda v: 235 + v * 20 // 255)
    blanks = {"white": Image.new("L", layout.size, 255), "1% speckle": speckled(0.01),
              "4% speckle": speckled(0.04), "shading 235-255": shaded,
              "4% speckle, blurred": _scans.degrade(Image.new("L", layout.size, 255), 3)}
    blank_pages = {k: _ocr.ink_range(v) for k, v in blanks.items()}
    white = blanks["white"]
    started = time.perf_counter()
    for _ in range(5):
        _ocr.is_blank(white)
    check_ms = (time.perf_counter() - started) / 5 * 1000
    import pytesseract

    started = time.perf_counter()
    pytesseract.image_to_data(white)
    tesseract_ms = (time.perf_counter() - started) * 1000
    lowest = min(text_pages, key=lambda k: text_pages[k])
    return {"threshold": _ocr.BLANK_RANGE, "text_pages": len(text_pages),
            "text_pages_lowest": {lowest: text_pages[lowest]},
            "text_pages_skipped": sorted(k for k, v in text_pages.items()
                                         if v <= _ocr.BLANK_RANGE),
            "blank_pages": blank_pages,
            "blank_pages_skipped": sorted(k for k, v in blank_pages.items()
                                          if v <= _ocr.BLANK_RANGE),
            "check_ms_letter_300dpi": round(check_ms, 1),
            "tesseract_ms_blank_letter_300dpi": round(tesseract_ms)}


# --- hostile scans ---------------------------------------------------------------------------


def hostile_files(folder: Path, blank_pages: int) -> dict[str, Path]:
    files = {}
    page = Image.new("1", (1275, 1650), 1)
    files[f"{blank_pages} blank pages (pdf)"] = _scans.save_pdf(
        folder / "blank.pdf", [page] * blank_pages, 150)
    frame = Image.new("1", (9000, 12000), 1)
    ImageDraw.Draw(frame).text((600, 600), "Register, frame", fill=0, font=_scans.font(120))
    frame.save(folder / "frames.tif", save_all=True, append_images=[frame] * 5,
               compression="group4")
    files["6 frames of 108 MP (tiff)"] = folder / "frames.tif"
    bomb = Image.new("1", (12000, 12000), 1)
    buffer = io.BytesIO()
    bomb.save(buffer, format="PNG", optimize=True)
    (folder / "bomb.png").write_bytes(buffer.getvalue())
    files["144 MP bomb (png)"] = folder / "bomb.png"
    letters = [_scans.page([P(t)], _scans.Layout(height_in=5.5)) for t in passages(3)]
    files["3 text pages (pdf, control)"] = _scans.save_pdf(folder / "control.pdf", letters)
    return files


CHILD = """
import json, sys, threading, time
import psutil, pytesseract
runs = []
real = pytesseract.image_to_data
def counted(image, *a, **k):
    runs.append(list(image.size))
    return real(image, *a, **k)
pytesseract.image_to_data = counted
peak = [0, 0]
me = psutil.Process()
def sample():  # RSS every 20 ms: this process's own, and Tesseract's (ru_maxrss would count
    while True:  # the import peak, and what a forked child shared with this process)
        peak[1] = max(peak[1], me.memory_info().rss)
        for child in me.children(recursive=True):
            try:
                if child.name().startswith("tesseract"):
                    peak[0] = max(peak[0], child.memory_info().rss)
            except psutil.Error:
                pass
        time.sleep(0.02)
from pgcite.ingest import _ocr
if sys.argv[2] == "off":
    _ocr.BLANK_RANGE = -1
from pgcite.ingest._loaders import iter_documents
from pathlib import Path
base = me.memory_info().rss
peak[1] = base
threading.Thread(target=sample, daemon=True).start()
started = time.perf_counter()
items = list(iter_documents([Path(sys.argv[1])]))
seconds = time.perf_counter() - started
outcome = [(f"{type(i).__name__}: {i.reason}" if not hasattr(i, "units")
            else f"read: {len(i.units)} passages of {len(i.ocr_pages)} OCR pages") for i in items]
print(json.dumps({"seconds": round(seconds, 1), "outcome": outcome, "tesseract_runs": len(runs),
    "largest_image_mp": round(max((w * h for w, h in runs), default=0) / 1e6, 1),
    "rss_before_mb": round(base / 2**20), "rss_peak_mb": round(peak[1] / 2**20),
    "tesseract_peak_mb": round(peak[0] / 2**20)}))
"""


def hostile(before: str | None, blank_pages: int, timeout_s: float) -> dict[str, Any]:
    out: dict[str, Any] = {}
    with tempfile.TemporaryDirectory() as tmp:
        files = hostile_files(Path(tmp), blank_pages)
        sizes = {label: path.stat().st_size for label, path in files.items()}
        variants: dict[str, tuple[dict[str, str], str]] = {
            "limits off, blank check off": (_unbounded(), "off"),
            "limits off, blank check on": (_unbounded(), "on"),
            "defaults": ({}, "on")}
        if before:
            src = Path(tmp) / "before"
            src.mkdir()
            archive_ = subprocess.run(["git", "archive", before, "src"], cwd=ROOT, check=True,
                                      capture_output=True).stdout
            subprocess.run(["tar", "-x", "-C", str(src)], input=archive_, check=True)
            variants = {f"before ({before[:7]})": ({"PYTHONPATH": str(src / "src")}, "on"),
                        **variants}
        for label, path in files.items():
            row: dict[str, Any] = {"file_kb": round(sizes[label] / 1024)}
            # the control is cheap: three interleaved rounds, the median run kept (the spread
            # of one variant's runs is the machine's noise)
            rounds = 3 if "control" in label else 1
            runs: dict[str, list[dict[str, Any]]] = {v: [] for v in variants}
            for _ in range(rounds):
                for variant, (env, blank_check) in variants.items():
                    runs[variant].append(_child(path, env, blank_check, timeout_s))
                    print(label, variant, runs[variant][-1], file=sys.stderr)
            for variant, done in runs.items():
                done.sort(key=lambda r: r["seconds"])
                row[variant] = {**done[len(done) // 2],
                                "seconds_all": [r["seconds"] for r in done]}
            out[label] = row
    return out


def _unbounded() -> dict[str, str]:
    return {"PGCITE_OCR_MAX_PAGES": "100000", "PGCITE_OCR_MAX_PAGE_PIXELS": "1000000000",
            "PGCITE_OCR_MAX_SECONDS": "86400"}


def _child(path: Path, env: dict[str, str], blank_check: str,
           timeout_s: float) -> dict[str, Any]:
    started = time.perf_counter()
    try:
        done = subprocess.run([sys.executable, "-c", CHILD, str(path), blank_check],
                              env={**os.environ, **env}, capture_output=True, text=True,
                              timeout=timeout_s, check=False)
    except subprocess.TimeoutExpired:
        return {"outcome": [f"stopped by the benchmark after {timeout_s:g} s"],
                "seconds": round(time.perf_counter() - started, 1)}
    if done.returncode != 0:
        tail = (done.stderr.strip().splitlines() or ["?"])[-1]
        return {"outcome": [f"crashed: {tail}"], "seconds": round(time.perf_counter() -
                                                                   started, 1)}
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


# --- main ------------------------------------------------------------------------------------


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sections", default=",".join(SECTIONS),
                        help=f"comma-separated, of {', '.join(SECTIONS)}")
    parser.add_argument("--pages", type=int, default=3, help="diary pages per CER variant")
    parser.add_argument("--blank-pages", type=int, default=400)
    parser.add_argument("--before", default=None,
                        help="commit whose code runs the hostile scans as 'before' (default: "
                        "the merge base with main; 'none' to skip)")
    parser.add_argument("--timeout", type=float, default=900, help="seconds a hostile run may take")
    args = parser.parse_args()
    sections = [s for s in args.sections.split(",") if s]
    before = args.before or subprocess.run(["git", "merge-base", "HEAD", "main"], cwd=ROOT,
                                           capture_output=True, text=True).stdout.strip()
    summary: dict[str, Any] = _load_previous()
    summary.update({
        "command": "python bench/ocr.py " + " ".join(sys.argv[1:]),
        "git_commit": git_commit(),
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, shared with other work",
        "low_confidence_threshold": _ocr.LOW_CONFIDENCE,
    })
    runs: dict[str, Callable[[], Any]] = {
        "cer": lambda: cer(args.pages), "layout": layout,
        "blank": lambda: blank(passages(args.pages)),
        "hostile": lambda: hostile(None if before == "none" else before, args.blank_pages,
                                   args.timeout)}
    for section in sections:
        summary[section] = {"git_commit": git_commit(), "result": runs[section]()}
    summary["load_average_at_end"] = [round(x, 1) for x in os.getloadavg()]
    OUT.mkdir(parents=True, exist_ok=True)
    (OUT / "summary.json").write_text(json.dumps(summary, indent=2) + "\n")
    (OUT / "report.md").write_text(report(summary))
    print(f"wrote {OUT}/summary.json, report.md", file=sys.stderr)


def _load_previous() -> dict[str, Any]:
    """Sections not run this time keep their last figures (each stamped with its commit)."""
    path = OUT / "summary.json"
    if not path.exists():
        return {}
    old = json.loads(path.read_text())
    return {k: v for k, v in old.items() if k in SECTIONS and "result" in v}


def report(s: dict[str, Any]) -> str:
    lines = ["# OCR: reading, passages, blank pages and hostile scans", "",
             f"Last command: `{s['command']}`. Machine: {s['machine']} (load "
             f"{s.get('load_average_at_end')} at the end): compare rows of one table, not "
             "machines. Each section says the commit it ran at.", ""]
    if "cer" in s:
        lines += _cer_report(s["cer"])
    if "layout" in s:
        lines += _layout_report(s["layout"])
    if "blank" in s:
        lines += _blank_report(s["blank"])
    if "hostile" in s:
        lines += _hostile_report(s["hostile"])
    return "\n".join(lines) + "\n"


def _cer_report(section: dict[str, Any]) -> list[str]:
    lines = ["## Character error rate", "", f"At {section['git_commit']}. Pepys diary passages "
             "(~600 characters each) typeset in DejaVu Serif on 8.5 x 5.5 in pages, read back "
             "through the ingest loader (PDF pages rendered at 300 dpi by pdfium). CER = edit "
             "distance / reference length, whitespace runs counted as one space. Degraded: "
             "tilted 1.5 degrees, Gaussian blur 1.2 px, 4% of pixels speckled. Flagged: below "
             "the low-confidence threshold or no text; a file on which nothing was recognised "
             "fails (its pages count CER 1.0).", "",
             "| variant | CER mean | CER per page | confidence per page | flagged | files "
             "failed | s/page |", "|---|---|---|---|---|---|---|"]
    lines += [f"| {r['variant']} | {r['cer_mean']} | {r['cer_per_page']} | "
              f"{r['confidence_per_page']} | {r['low_confidence_pages']} | "
              f"{len(r['files_failed'])} | {r['seconds_per_page']} |" for r in section["result"]]
    return [*lines, ""]


def _layout_report(section: dict[str, Any]) -> list[str]:
    result = section["result"]
    lines = ["## Passages of a scanned archive, and answers from them", "",
             f"At {section['git_commit']}. An inventory (a heading over a list), two-column "
             "letters and an accounts page in a PDF without a text layer (a blank verso "
             "between), a two-frame TIFF register; ingested with the defaults (MiniLM, hybrid "
             f"search, the extractive answerer), {len(QUESTIONS)} questions with known answers. "
             "Top-1: the first hit holds a gold string / is from the page that answers. Best "
             "passage: the largest share of a question's gold strings one top-5 passage holds "
             "(a list answer whole in one passage: 1.0). Answer: share of the gold strings the "
             "answer says; it cites that page.", "",
             "| reading | passages | top-1 holds answer | top-1 right page | best passage gold "
             "share | answer says gold (share) | answer cites right page | abstained |",
             "|---|---|---|---|---|---|---|---|"]
    lines += [f"| {name} | {r['passages']} | {r['top1_has_answer']} | {r['top1_right_page']} | "
              f"{r['best_passage_gold_share']} | {r['answer_gold_share']} | "
              f"{r['answer_cites_right_page']} | {r['abstained']} |"
              for name, r in result.items()]
    lines += ["", "Per question, best passage / answer gold share, " + " → ".join(result)
              + ":", ""]
    for i, (question, *_) in enumerate(QUESTIONS):
        shares = " → ".join(f"{result[n]['rows'][i]['best_passage_gold_share']} / "
                            f"{result[n]['rows'][i]['answer_gold_share']}" for n in result)
        lines.append(f"- {question} {shares}")
    return [*lines, ""]


def _blank_report(section: dict[str, Any]) -> list[str]:
    r = section["result"]
    (lowest, value), = r["text_pages_lowest"].items()
    lines = ["## The blank-page check", "", f"At {section['git_commit']}. A page is shrunk by "
             f"box averaging to ~{_ocr.BLANK_SIDE} px on its short side; it is blank (not sent to "
             f"Tesseract) when its lightest and darkest pixels differ by at most "
             f"{r['threshold']} grey levels.", "",
             f"- {r['text_pages']} pages with text (every CER variant, single words, a faint "
             f"grey word): lowest range {value} ({lowest}); skipped: "
             f"{r['text_pages_skipped'] or 'none'}",
             "- blank scans: " + ", ".join(f"{k} {v}" for k, v in r["blank_pages"].items())
             + f"; skipped: {', '.join(r['blank_pages_skipped'])}",
             f"- cost on a letter page at 300 dpi: the check {r['check_ms_letter_300dpi']} ms, "
             f"a Tesseract run on the blank page {r['tesseract_ms_blank_letter_300dpi']} ms", ""]
    return lines


def _hostile_report(section: dict[str, Any]) -> list[str]:
    result = section["result"]
    variants = [k for k in next(iter(result.values())) if k != "file_kb"]
    lines = ["## Hostile scans: time and peak memory", "",
             f"At {section['git_commit']}. Each file read by the loader in a fresh process (the "
             "control three times, interleaved: its seconds show the machine's noise); "
             "memory sampled every 20 ms: the process's RSS (before reading → peak while "
             "reading) and the largest Tesseract process's. Defaults: at most 300 OCR pages a file, 40 MP a page, 900 s "
             "a file; blank pages skip Tesseract.", "",
             "| file | variant | seconds | outcome | Tesseract runs | process MB | Tesseract MB |",
             "|---|---|---|---|---|---|---|"]
    for label, row in result.items():
        for variant in variants:
            v = row[variant]
            memory = (f"{v['rss_before_mb']} → {v['rss_peak_mb']}" if "rss_peak_mb" in v
                      else "–")
            seconds = " / ".join(map(str, v.get("seconds_all", [v["seconds"]])))
            lines.append(f"| {label} ({row['file_kb']} KB) | {variant} | {seconds} | "
                         f"{'; '.join(v['outcome'])[:160]} | {v.get('tesseract_runs', '–')} | "
                         f"{memory} | {v.get('tesseract_peak_mb', '–')} |")
    return [*lines, ""]


if __name__ == "__main__":
    main()
