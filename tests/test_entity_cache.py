"""The entity cache (store/_entity_cache.py, issue 38): what an entity model found in a chunk
text is read once per collection and model version, kept as the model gave it (labels are
filtered and names keyed when it is read), committed as it is read. A fake model stands in for
spaCy here (the ingest with the real one: tests/test_entities.py); the database is real."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

import pgcite
from pgcite.ingest._entities import mentions
from pgcite.store._entities import Mention
from pgcite.store._entity_cache import Found, read_with_cache

A, B = "entity_cache_a", "entity_cache_b"


class FakeModel:
    """Finds each text's capitalised words as PERSON and its digits as DATE; records what it
    was asked to read."""

    def __init__(self) -> None:
        self.calls: list[list[str]] = []

    def __call__(self, texts: list[str]) -> list[Found]:
        self.calls.append(list(texts))
        return [[("DATE" if word.isdigit() else "PERSON", word.strip("."))
                 for word in text.split() if word[0].isupper() or word.isdigit()]
                for text in texts]


@pytest.fixture
def two(client: pgcite.Client) -> Iterator[pgcite.Client]:
    for name in (A, B):
        client.drop_collection(name, missing_ok=True)
        client.create_collection(name)
    yield client
    for name in (A, B):
        client.drop_collection(name, missing_ok=True)


def _rows(client: pgcite.Client, collection: str) -> list[tuple[str, object]]:
    with client.db.connect() as conn:
        return [(model, found) for model, found in conn.execute(
            "SELECT model, found FROM pgcite.entity_cache WHERE collection = %s ORDER BY model",
            (collection,))]


def test_each_text_is_read_once_per_collection_and_model(two: pgcite.Client) -> None:
    model = FakeModel()
    texts = ["Pepys went home.", "Penn came by.", "Pepys went home."]
    found, read = read_with_cache(two.db, "fake@1", model, texts, scope=A)
    assert model.calls == [["Pepys went home.", "Penn came by."]] and read == 2  # once each
    assert found == [[("PERSON", "Pepys")], [("PERSON", "Penn")], [("PERSON", "Pepys")]]

    again, read = read_with_cache(two.db, "fake@1", model, [*texts[::-1], "Hewer wrote."],
                                  scope=A)
    assert model.calls[1:] == [["Hewer wrote."]] and read == 1  # only the new text
    assert again == [*found[::-1], [("PERSON", "Hewer")]]  # in the order asked, from the cache

    _, read = read_with_cache(two.db, "fake@2", model, texts, scope=A)
    assert read == 2  # another model version reads everything once
    _, read = read_with_cache(two.db, "fake@1", model, texts, scope=B)
    assert read == 2  # another collection's cache is its own: it says nothing of A's texts
    assert len(_rows(two, A)) == 5 and len(_rows(two, B)) == 2

    two.drop_collection(A)
    assert _rows(two, A) == [] and len(_rows(two, B)) == 2  # the rows go with the collection


def test_the_model_output_is_kept_as_it_is_and_filtered_when_read(two: pgcite.Client) -> None:
    """Labels the ingest drops (DATE) and repeated spellings stay in the cache, so a change to
    which labels are kept or how names become keys needs no re-read."""
    def model(texts: list[str]) -> list[Found]:
        return [[("PERSON", "Sir W. Penn"), ("DATE", "1666"), ("PERSON", "Sir W. Penn's"),
                 ("GPE", "Deptford")] for _ in texts]

    found, _ = read_with_cache(two.db, "fake@1", model, ["To Deptford with Sir W. Penn."],
                               scope=A)
    assert _rows(two, A) == [("fake@1", [["PERSON", "Sir W. Penn"], ["DATE", "1666"],
                                         ["PERSON", "Sir W. Penn's"], ["GPE", "Deptford"]])]
    cached, read = read_with_cache(two.db, "fake@1", model, ["To Deptford with Sir W. Penn."],
                                   scope=A)
    assert read == 0 and cached == found
    assert mentions(cached[0]) == [Mention("w penn", "PERSON", "Sir W. Penn", 2),
                                   Mention("deptford", "GPE", "Deptford")]


def test_a_failed_read_stores_nothing_and_keeps_what_was_read_before(
        two: pgcite.Client) -> None:
    model = FakeModel()
    read_with_cache(two.db, "fake@1", model, ["Pepys went home."], scope=A)

    def broken(texts: list[str]) -> list[Found]:
        raise RuntimeError("the model crashed")

    with pytest.raises(RuntimeError, match="crashed"):
        read_with_cache(two.db, "fake@1", broken, ["Pepys went home.", "Penn came by."],
                        scope=A)
    assert _rows(two, A) == [("fake@1", [["PERSON", "Pepys"]])]  # nothing half-written
    _, read = read_with_cache(two.db, "fake@1", model, ["Pepys went home.", "Penn came by."],
                              scope=A)
    assert read == 1 and model.calls[-1] == ["Penn came by."]  # resumes from the cache
