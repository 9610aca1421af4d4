"""load_golden: golden.jsonl and BEIR folders, and the errors that name the bad line."""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from pathlib import Path

import pytest

from pgcite._errors import ConfigError
from pgcite.evaluate import GoldenQuery, load_golden

FIXTURES = Path(__file__).parent / "fixtures" / "eval"


def test_golden_jsonl_fields_and_hash() -> None:
    golden = load_golden(FIXTURES / "golden.jsonl")
    assert golden.name == "eval"
    assert [q.id for q in golden.queries] == ["g1", "g2", "g3", "g4", "g5", "g6"]
    assert golden.kinds() == ["fact", "keyword", "paraphrase", "cutoff", "absent"]
    g1, g4, g5 = golden.queries[0], golden.queries[3], golden.queries[4]
    assert g1.text == "What did he see during the fire?"
    assert g1.relevant == {"d1": 1, "d2": 1}
    assert g1.note == "two entries"
    assert g4.cutoff == dt.date(1663, 12, 31)
    assert g4.must_not == ["d8"]
    assert g1.answerable and g4.answerable and not g5.answerable
    assert golden.sha256 == hashlib.sha256((FIXTURES / "golden.jsonl").read_bytes()).hexdigest()


def test_folder_with_golden_jsonl() -> None:
    assert load_golden(FIXTURES).sha256 == load_golden(FIXTURES / "golden.jsonl").sha256


def test_beir_defaults_to_test_split_and_keeps_judged_queries() -> None:
    golden = load_golden(FIXTURES / "beir")
    assert golden.name == "beir:test"
    assert [q.id for q in golden.queries] == ["q1", "q2", "q4"]  # q3 has no test judgment
    q1, q4 = golden.queries[0], golden.queries[2]
    assert q1.kind == "query" and q1.relevant == {"d1": 1, "d2": 2}
    assert q4.relevant == {"d9": 0} and not q4.answerable  # judged, but nothing relevant
    both = (FIXTURES / "beir/queries.jsonl").read_bytes() + (
        FIXTURES / "beir/qrels/test.tsv"
    ).read_bytes()
    assert golden.sha256 == hashlib.sha256(both).hexdigest()


def test_beir_explicit_split_and_name() -> None:
    golden = load_golden(FIXTURES / "beir", split="train", name="tiny")
    assert golden.name == "tiny"
    assert [(q.id, q.relevant) for q in golden.queries] == [("q3", {"d5": 1})]


def test_answerable_needs_a_positive_grade() -> None:
    assert not GoldenQuery(id="x", text="t", relevant={"a": 0}).answerable
    assert GoldenQuery(id="x", text="t", relevant={"a": 0, "b": 2}).relevant_ids == {"b"}


# --- errors -------------------------------------------------------------------------------------


def _write(tmp_path: Path, *lines: dict[str, object] | str) -> Path:
    path = tmp_path / "golden.jsonl"
    text = [line if isinstance(line, str) else json.dumps(line) for line in lines]
    path.write_text("\n".join(text) + "\n", encoding="utf-8")
    return path


GOOD: dict[str, object] = {
    "id": "a",
    "query": "q",
    "kind": "fact",
    "relevant": ["d1"],
    "cutoff": None,
}


@pytest.mark.parametrize(
    ("bad", "message"),
    [
        ("{not json", "golden.jsonl:2: not valid JSON"),
        ("[1, 2]", "golden.jsonl:2: expected a JSON object"),
        ({**GOOD, "id": "b", "kind": "trivia"}, "golden.jsonl:2: unknown kind 'trivia'"),
        ({**GOOD, "id": "b", "kind": "absent"}, "golden.jsonl:2: an 'absent' query cannot"),
        ({**GOOD, "id": "b", "relevant": []}, "golden.jsonl:2: a 'fact' query needs"),
        ({**GOOD, "id": "b", "kind": "cutoff"}, "golden.jsonl:2: a 'cutoff' query needs a cutoff"),
        ({**GOOD, "id": "b", "cutoff": "not a date"}, "golden.jsonl:2: cutoff"),
        ({**GOOD, "id": "b", "query": ""}, "golden.jsonl:2: text"),
        ({**GOOD, "relevant": "d1"}, "golden.jsonl:2: 'relevant' must be a list"),
        (GOOD, "golden.jsonl:2: duplicate query id 'a'"),
    ],
)
def test_bad_golden_line_names_the_line(
    tmp_path: Path, bad: dict[str, object] | str, message: str
) -> None:
    path = _write(tmp_path, GOOD, bad)
    with pytest.raises(ConfigError, match=message):
        load_golden(path)


def test_blank_lines_still_count_for_line_numbers(tmp_path: Path) -> None:
    path = _write(tmp_path, GOOD, "", "{oops")
    with pytest.raises(ConfigError, match="golden.jsonl:3:"):
        load_golden(path)


def test_missing_and_unrecognised_paths(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file or folder"):
        load_golden(tmp_path / "nope.jsonl")
    (tmp_path / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match="not a judged query set"):
        load_golden(tmp_path / "notes.txt")
    with pytest.raises(ConfigError, match="no golden.jsonl and no BEIR layout"):
        load_golden(tmp_path)


def _beir(tmp_path: Path, qrels: dict[str, str], queries: str | None = None) -> Path:
    (tmp_path / "qrels").mkdir()
    default = '{"_id": "q1", "text": "one"}\n{"_id": "q2", "text": "two"}\n'
    (tmp_path / "queries.jsonl").write_text(queries or default, encoding="utf-8")
    for split, text in qrels.items():
        (tmp_path / "qrels" / f"{split}.tsv").write_text(text, encoding="utf-8")
    return tmp_path


HEADER = "query-id\tcorpus-id\tscore\n"


def test_beir_bad_qrels_line(tmp_path: Path) -> None:
    folder = _beir(tmp_path, {"test": HEADER + "q1\td1\t1\nq2 d2 1\n"})
    with pytest.raises(ConfigError, match=r"test.tsv:3: expected 'query-id<TAB>"):
        load_golden(folder)


def test_beir_non_integer_grade(tmp_path: Path) -> None:
    folder = _beir(tmp_path, {"test": HEADER + "q1\td1\thigh\n"})
    with pytest.raises(ConfigError, match=r"test.tsv:2: score 'high' is not an integer"):
        load_golden(folder)


def test_beir_split_choice_errors(tmp_path: Path) -> None:
    folder = _beir(tmp_path, {"dev": HEADER + "q1\td1\t1\n", "train": HEADER + "q2\td1\t1\n"})
    with pytest.raises(ConfigError, match="choose a split") as err:
        load_golden(folder)
    assert err.value.hint == "available: dev, train"
    with pytest.raises(ConfigError, match="no such split"):
        load_golden(folder, split="test")


def test_beir_judged_query_without_text(tmp_path: Path) -> None:
    folder = _beir(tmp_path, {"test": HEADER + "q9\td1\t1\n"})
    with pytest.raises(ConfigError, match="not in queries.jsonl, e.g. 'q9'"):
        load_golden(folder)


def test_beir_bad_queries_line(tmp_path: Path) -> None:
    folder = _beir(tmp_path, {"test": HEADER + "q1\td1\t1\n"}, queries='{"_id": "q1"}\n')
    with pytest.raises(ConfigError, match=r"queries.jsonl:1: needs a non-empty string"):
        load_golden(folder)
