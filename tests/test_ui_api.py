"""The inspector's JSON endpoint (no browser): the legs' lists are the search's own, a pinned
snapshot holds for the answer too, bad input is a 4xx, and keys scope it like the HTTP API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import pgcite
from pgcite.service import ServiceConfig, create_app
from pgcite.service._keys import create_key
from pgcite.ui import mount_ui

from .small_collection import one_passage_collection

QUERY = "the great fire in the City"


@pytest.fixture(scope="module")
def other(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory) -> pgcite.Collection:
    return one_passage_collection(client, tmp_path_factory.mktemp("ui"), "ui_other")


@pytest.fixture(scope="module")
def api(client: pgcite.Client, diary: pgcite.Collection) -> Iterator[TestClient]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    mount_ui(app)
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def reader(client: pgcite.Client, diary: pgcite.Collection) -> dict[str, str]:
    with client.db.transaction() as conn:
        return {"Authorization": f"Bearer {create_key(conn, diary.name, 'reader').token}"}


def _url(name: str) -> str:
    return f"/ui/api/collections/{name}/inspect"


def test_page_and_assets_load(api: TestClient) -> None:
    page = api.get("/ui")
    assert page.status_code == 200 and "pgcite inspector" in page.text
    assert api.get("/ui/static/app.js").headers["content-type"].startswith("text/javascript")
    assert api.get("/ui/static/style.css").status_code == 200
    assert api.get("/ui/static/../_routes.py").status_code == 404
    assert api.get("/ui/static/secret.txt").status_code == 404


def test_inspect_lists_are_the_searchs_own(
    api: TestClient, reader: dict[str, str], diary: pgcite.Collection,
) -> None:
    out = api.post(_url(diary.name), headers=reader,
                   json={"query": QUERY, "top_k": 3, "answer": True}).json()
    expected = diary.search(QUERY, top_k=3, explain=True)
    assert [h["id"] for h in out["fused"]] == [h.id for h in expected.hits]
    assert out["dropped"] == [h.id for h in expected.dropped] and out["dropped"]
    ranks = [h["keywordRank"] for h in out["keyword"]]
    assert ranks == sorted(ranks) and None not in ranks
    assert [h["vectorRank"] for h in out["vector"]] == sorted(h["vectorRank"]
                                                               for h in out["vector"])
    answer = out["answer"]
    assert set(answer["citations"]) <= {s["id"] for s in answer["sources"]}
    assert answer["snapshotId"] == out["snapshot_id"]


def test_inspect_cutoff_and_bad_input(
    api: TestClient, reader: dict[str, str], diary: pgcite.Collection,
) -> None:
    out = api.post(_url(diary.name), headers=reader,
                   json={"query": QUERY, "cutoff": "1665-12-31"}).json()
    every = out["fused"] + out["keyword"] + out["vector"]
    assert every and all(h["dateEnd"] and h["dateEnd"] <= "1665-12-31" for h in every)
    for body, code in [({"query": QUERY, "filters": ["nope=1"]}, 400),
                       ({"query": QUERY, "filters": ["bad filter"]}, 400),
                       # a reader may query the active snapshot only (as the HTTP API)
                       ({"query": QUERY, "snapshot_id": 9999}, 403),
                       # beyond PostgreSQL's integer: refused as input, never a 500
                       ({"query": QUERY, "snapshot_id": 2**63}, 422),
                       ({"query": ""}, 422), ({"query": QUERY, "cutoff": "soon"}, 422)]:
        resp = api.post(_url(diary.name), headers=reader, json=body)
        assert resp.status_code == code, (body, resp.text)


def test_inspect_is_keyed(api: TestClient, reader: dict[str, str], diary: pgcite.Collection,
                          other: pgcite.Collection) -> None:
    assert api.post(_url(diary.name), json={"query": "fire"}).status_code == 401
    # another collection looks like an unknown one (404, the same message)
    refused = api.post(_url(other.name), headers=reader, json={"query": "fire"})
    unknown = api.post(_url("no_such_one"), headers=reader, json={"query": "fire"})
    assert refused.status_code == unknown.status_code == 404
    assert refused.json()["detail"] == f"no collection named {other.name!r}"
