"""Chunking: budgets, unit boundaries, overlap, ids and citations (word-count tokenizer, no models)."""

from __future__ import annotations

import datetime as dt
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pgcite._errors import ConfigError
from pgcite._types import ChunkDraft, Document, Unit
from pgcite.ingest._chunking import chunk_document, citation_suffix, format_citation


def words(s: str) -> int:
    return len(s.split())


def doc(*units: Unit, title: str | None = None, **kwargs: object) -> Document:
    return Document(document_id="d", source="s.txt", units=list(units), title=title, **kwargs)  # type: ignore[arg-type]


def sentences(prefix: str, n: int, length: int = 5) -> str:
    """``n`` sentences of ``length`` words each, words numbered so they are all distinct."""
    return " ".join(" ".join(f"{prefix}{i}w{j}" for j in range(length)) + "." for i in range(n))


def fits(chunk: ChunkDraft, max_tokens: int) -> bool:
    with_title = words(chunk.body) + (words(chunk.title) if chunk.title else 0)
    return with_title <= max_tokens or (
        max_tokens - words(chunk.title or "") < 32 and words(chunk.body) <= max_tokens
    )


# --- citation ids and strings --------------------------------------------------------------


@pytest.mark.parametrize(
    ("i", "suffix"),
    [
        (0, "a"),
        (1, "b"),
        (25, "z"),
        (26, "aa"),
        (27, "ab"),
        (51, "az"),
        (52, "ba"),
        (701, "zz"),
        (702, "aaa"),
    ],
)
def test_citation_suffix(i: int, suffix: str) -> None:
    assert citation_suffix(i) == suffix


def test_citation_suffix_is_unique_and_rejects_negatives() -> None:
    assert len({citation_suffix(i) for i in range(5000)}) == 5000
    with pytest.raises(ValueError):
        citation_suffix(-1)


def test_format_citation() -> None:
    day = dt.date(1666, 9, 12)
    assert (
        format_citation(
            author="Samuel Pepys", title="2nd", date_start=day, date_end=day,
            source="chapter-7.xhtml", locator=None,
        )
        == "Samuel Pepys, 2nd, 1666-09-12, chapter-7.xhtml"
    )  # fmt: skip
    assert (
        format_citation(
            author=None, title=" ", date_start=day, date_end=dt.date(1666, 9, 20),
            source="diary", locator="p. 4",
        )
        == "1666-09-12–1666-09-20, diary, p. 4"
    )  # fmt: skip
    assert (
        format_citation(
            author=None, title=None, date_start=None, date_end=None, source="", locator=None
        )
        == ""
    )


# --- basic shape ---------------------------------------------------------------------------


def test_unit_that_fits_is_one_chunk_with_all_fields() -> None:
    day = dt.date(1666, 9, 12)
    d = Document(
        document_id="pepys-1666-9-12",
        source="chapter-7.xhtml",
        title="2nd",
        author="Samuel Pepys",
        corpus="pepys",
        metadata={"section": "September 1666"},
        units=[Unit(text="  Up betimes.\n\nTo the office.  ", date_start=day)],
    )
    (chunk,) = chunk_document(d, count_tokens=words, max_tokens=50)
    assert chunk == ChunkDraft(
        id="pepys-1666-9-12-a",
        document_id="pepys-1666-9-12",
        ordinal=0,
        body="Up betimes.\n\nTo the office.",
        title="2nd",
        locator=None,
        date_start=day,
        date_end=day,  # filled from date_start
        author="Samuel Pepys",
        corpus="pepys",
        source="chapter-7.xhtml",
        citation="Samuel Pepys, 2nd, 1666-09-12, chapter-7.xhtml",
        metadata={"section": "September 1666"},
    )


def test_units_never_share_a_chunk_and_ordinals_run_across_units() -> None:
    d = doc(
        Unit(text="First page.", locator="p. 1"),
        Unit(text="   "),  # whitespace-only: no chunk
        Unit(text="Second page.", locator="p. 2", title="Section"),
        title="Report",
    )
    chunks = chunk_document(d, count_tokens=words, max_tokens=100)
    assert [(c.id, c.ordinal, c.body, c.locator, c.title) for c in chunks] == [
        ("d-a", 0, "First page.", "p. 1", "Report"),
        ("d-b", 1, "Second page.", "p. 2", "Report > Section"),  # titled within its document
    ]
    assert chunks[1].citation == "Report > Section, s.txt, p. 2"


def test_paragraphs_are_packed_greedily_and_keep_breaks() -> None:
    paras = [sentences(f"p{i}", 1, 10) for i in range(5)]  # 10 words each
    chunks = chunk_document(doc(Unit(text="\n\n".join(paras))), count_tokens=words, max_tokens=35)
    assert [c.body for c in chunks] == [
        "\n\n".join(paras[0:3]),
        "\n\n".join(paras[3:5]),
    ]


def test_paragraph_that_fits_a_chunk_is_not_split() -> None:
    # p1's first sentence would still fit after p0, but p1 fits a chunk whole, so it moves.
    p0, p1 = sentences("a", 2, 10), sentences("b", 2, 10)
    chunks = chunk_document(doc(Unit(text=f"{p0}\n\n{p1}")), count_tokens=words, max_tokens=31)
    assert [c.body for c in chunks] == [p0, p1]


def test_single_newlines_are_paragraphs_when_there_are_no_blank_lines() -> None:
    lines = [sentences(f"l{i}", 1, 10) for i in range(4)]
    chunks = chunk_document(doc(Unit(text="\n".join(lines))), count_tokens=words, max_tokens=32)
    assert [c.body for c in chunks] == ["\n".join(lines[0:3]), lines[3]]


def test_long_paragraph_splits_at_sentences() -> None:
    text = sentences("s", 12, 6)  # 72 words, one paragraph
    chunks = chunk_document(doc(Unit(text=text)), count_tokens=words, max_tokens=40)
    assert len(chunks) == 2
    assert all(c.body.endswith(".") for c in chunks)
    assert " ".join(c.body for c in chunks) == text
    assert all(words(c.body) <= 40 for c in chunks)


def test_sentence_boundaries_in_other_scripts() -> None:
    arabic = " ".join(f"كلمة{i} أخرى{i} هنا{i}؟" for i in range(20))  # 60 words
    chunks = chunk_document(doc(Unit(text=arabic)), count_tokens=words, max_tokens=32)
    assert len(chunks) > 1 and all(c.body.endswith("؟") for c in chunks)

    cjk = "".join(f"这是第{i}句话。" for i in range(40))  # no spaces at all
    chunks = chunk_document(doc(Unit(text=cjk)), count_tokens=len, max_tokens=40)
    assert len(chunks) > 1
    assert all(c.body.endswith("。") and len(c.body) <= 40 for c in chunks)
    assert "".join(c.body for c in chunks) == cjk


@pytest.mark.parametrize("abbreviation", ["Mr.", "Dr.", "J.", "e.g."])
def test_abbreviations_do_not_end_sentences(abbreviation: str) -> None:
    # Budget 6 packs to 5: a cut after the abbreviation would put it in the first chunk.
    text = f"Up early to-day. {abbreviation} Pepys went out."
    chunks = chunk_document(doc(Unit(text=text)), count_tokens=words, max_tokens=6)
    assert [c.body for c in chunks] == ["Up early to-day.", f"{abbreviation} Pepys went out."]


def test_overlong_sentence_splits_at_words() -> None:
    text = " ".join(f"w{i}" for i in range(100))  # one 100-word "sentence"
    chunks = chunk_document(doc(Unit(text=text)), count_tokens=words, max_tokens=40)
    assert all(words(c.body) <= 40 for c in chunks)
    assert " ".join(c.body for c in chunks) == text


def test_text_without_spaces_splits_by_characters() -> None:
    text = "x" * 250
    chunks = chunk_document(doc(Unit(text=text)), count_tokens=len, max_tokens=100)
    assert all(len(c.body) <= 100 for c in chunks)
    assert "".join(c.body for c in chunks) == text


# --- budget --------------------------------------------------------------------------------


def test_title_counts_against_the_budget() -> None:
    title = " ".join(["title"] * 10)
    text = sentences("s", 20, 5)  # 100 words
    chunks = chunk_document(doc(Unit(text=text), title=title), count_tokens=words, max_tokens=50)
    assert all(words(c.body) + 10 <= 50 for c in chunks)
    assert max(words(c.body) for c in chunks) > 30  # the budget is used, not wasted


def test_long_title_is_ignored_for_budgeting() -> None:
    title = " ".join(["title"] * 30)  # leaves 20 < 32 tokens for the body
    text = sentences("s", 20, 5)
    chunks = chunk_document(doc(Unit(text=text), title=title), count_tokens=words, max_tokens=50)
    assert max(words(c.body) for c in chunks) > 20
    assert all(words(c.body) <= 50 for c in chunks)


def test_whole_unit_that_fits_exactly_is_one_chunk() -> None:
    text = sentences("s", 10, 5)  # 50 words
    assert len(chunk_document(doc(Unit(text=text)), count_tokens=words, max_tokens=50)) == 1
    assert len(chunk_document(doc(Unit(text=text)), count_tokens=words, max_tokens=49)) == 2


def test_non_additive_tokenizer_still_respects_the_budget() -> None:
    # Joining paragraphs costs extra tokens here, so sums of parts underestimate the whole.
    def lumpy(s: str) -> int:
        return words(s) + 8 * s.count("\n\n")

    text = "\n\n".join(sentences(f"p{i}", 1, 4) for i in range(30))
    chunks = chunk_document(doc(Unit(text=text)), count_tokens=lumpy, max_tokens=40)
    assert all(lumpy(c.body) <= 40 for c in chunks)
    assert sum(words(c.body) for c in chunks) == words(text)


def test_count_tokens_is_called_linearly() -> None:
    calls = 0

    def counting(s: str) -> int:
        nonlocal calls
        calls += 1
        return words(s)

    n_sentences = 400
    text = "\n\n".join(sentences(f"p{i}", 4, 5) for i in range(n_sentences // 4))
    chunks = chunk_document(doc(Unit(text=text), title="T"), count_tokens=counting, max_tokens=64)
    # title + whole unit + each sentence once + one check per chunk
    assert calls <= 2 + n_sentences + len(chunks)


@pytest.mark.parametrize(("max_tokens", "overlap"), [(0, 0), (-5, 0), (10, 10), (10, -1)])
def test_bad_budgets_are_config_errors(max_tokens: int, overlap: int) -> None:
    with pytest.raises(ConfigError):
        chunk_document(
            doc(Unit(text="x")), count_tokens=words, max_tokens=max_tokens, overlap_tokens=overlap
        )


# --- overlap -------------------------------------------------------------------------------


def test_overlap_repeats_trailing_sentences_within_a_unit() -> None:
    text = sentences("s", 12, 5)  # sentences s0..s11, 5 words each
    chunks = chunk_document(
        doc(Unit(text=text)), count_tokens=words, max_tokens=32, overlap_tokens=10
    )
    assert len(chunks) >= 3
    for prev, cur in zip(chunks, chunks[1:], strict=False):
        prev_sentences = re.findall(r"[^.]+\.", prev.body)
        cur_sentences = re.findall(r"[^.]+\.", cur.body)
        shared = [s.strip() for s in prev_sentences[-2:]]
        assert [s.strip() for s in cur_sentences[:2]] == shared  # two 5-word sentences = 10 tokens
        assert words(cur.body) <= 32


def test_overlap_never_crosses_units() -> None:
    first, second = sentences("a", 8, 5), sentences("b", 8, 5)
    d = doc(Unit(text=first, locator="p. 1"), Unit(text=second, locator="p. 2"))
    chunks = chunk_document(d, count_tokens=words, max_tokens=32, overlap_tokens=10)
    by_unit = {loc: [c.body for c in chunks if c.locator == loc] for loc in ("p. 1", "p. 2")}
    assert by_unit["p. 2"][0].startswith("b0w0")
    assert all(
        "a" not in re.sub(r"b\d+w\d+", "", body).replace(".", "").strip()
        for body in by_unit["p. 2"]
    )
    assert all("b" not in body for body in by_unit["p. 1"])


def test_overlap_zero_means_no_repeats() -> None:
    text = sentences("s", 12, 5)
    chunks = chunk_document(doc(Unit(text=text)), count_tokens=words, max_tokens=32)
    assert " ".join(c.body for c in chunks) == text


def test_deterministic_ids_and_bodies() -> None:
    text = "\n\n".join(sentences(f"p{i}", 3, 7) for i in range(10))
    d = doc(Unit(text=text), Unit(text=text[:200]))
    runs = [
        chunk_document(d, count_tokens=words, max_tokens=40, overlap_tokens=8) for _ in range(2)
    ]
    assert runs[0] == runs[1]
    ids = [c.id for c in runs[0]]
    assert ids == [f"d-{citation_suffix(i)}" for i in range(len(ids))]
    assert len(set(ids)) == len(ids)


# --- properties ----------------------------------------------------------------------------

_SEPARATORS = st.sampled_from([" ", " ", " ", ". ", "! ", "? ", "\n", "\n\n", " \n \n "])


@st.composite
def unit_texts(draw: st.DrawFn) -> str:
    """Texts of distinct numbered words with random sentence and paragraph breaks."""
    n = draw(st.integers(min_value=0, max_value=300))
    seps = draw(st.lists(_SEPARATORS, min_size=n, max_size=n))
    return "".join(f"w{i}{sep}" for i, sep in enumerate(seps))


def word_ids(body: str) -> list[int]:
    return [int(m) for m in re.findall(r"w(\d+)", body)]


@settings(max_examples=150, deadline=None)
@given(
    texts=st.lists(unit_texts(), min_size=1, max_size=3),
    max_tokens=st.integers(min_value=3, max_value=80),
    overlap_ratio=st.floats(min_value=0, max_value=0.9),
    title=st.sampled_from([None, "Short title", "a much longer title " * 3]),
)
def test_chunks_fit_cover_and_stay_in_unit(
    texts: list[str], max_tokens: int, overlap_ratio: float, title: str | None
) -> None:
    overlap = int(max_tokens * overlap_ratio)
    units = [Unit(text=t, locator=str(i)) for i, t in enumerate(texts)]
    chunks = chunk_document(
        doc(*units, title=title), count_tokens=words, max_tokens=max_tokens, overlap_tokens=overlap
    )
    assert [c.ordinal for c in chunks] == list(range(len(chunks)))
    for i, text in enumerate(texts):
        mine = [c for c in chunks if c.locator == str(i)]
        expected = word_ids(text)
        assert all(c.body.strip() and fits(c, max_tokens) for c in mine)
        # Each chunk is a contiguous run of the unit's words; runs advance and cover everything.
        runs = [word_ids(c.body) for c in mine]
        assert all(r == list(range(r[0], r[0] + len(r))) for r in runs)
        covered: list[int] = []
        for prev, run in zip([[]] + runs, runs, strict=False):
            shared = len(prev) - prev.index(run[0]) if prev and run[0] in prev else 0
            assert shared <= overlap
            assert run[0] == (prev[-1] + 1 if prev else 0) - shared
            covered.extend(run[shared:])
        assert covered == expected
