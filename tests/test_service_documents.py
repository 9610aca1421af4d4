"""Documents and pinned snapshots over HTTP: list (reader), delete (admin: a new inactive
snapshot), and `snapshot` in a query (a reader the active one only; an admin any)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from fastapi.testclient import TestClient

import pgcite
from pgcite.service import ServiceConfig, create_app, create_key

from .conftest import DIARY


@pytest.fixture(scope="module")
def col(client: pgcite.Client) -> Iterator[pgcite.Collection]:
    collection = client.create_collection("svc_docs")
    assert collection.ingest([DIARY]).activated
    yield collection
    client.drop_collection("svc_docs")


@pytest.fixture(scope="module")
def api(client: pgcite.Client, col: pgcite.Collection) -> Iterator[TestClient]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    with TestClient(app) as test_client:
        yield test_client


def _headers(client: pgcite.Client, role: str) -> dict[str, str]:
    with client.db.transaction() as conn:
        return {"Authorization": f"Bearer {create_key(conn, 'svc_docs', role).token}"}


BASE = "/v1/collections/svc_docs"


def test_documents_list_delete_and_pinned_search(api: TestClient, client: pgcite.Client,
                                                 col: pgcite.Collection) -> None:
    reader, admin = _headers(client, "reader"), _headers(client, "admin")
    resp = api.get(f"{BASE}/documents", headers=reader, params={"limit": 3})
    assert resp.status_code == 200, resp.text
    page = resp.json()
    assert [d["id"] for d in page] == ["d-1660-01-01", "d-1660-03-15", "d-1661-04-23"]
    assert page[0]["date"] == "1660-01-01" and page[0]["chunks"] == 1
    active = col.active_snapshot().snapshot_id

    # deleting: admin only; an unknown id is a 400 and builds nothing
    url = f"{BASE}/documents"
    assert api.delete(url, headers=reader, params={"id": "e-1668-01-01"}).status_code == 403
    before = len(col.snapshots())
    bad = api.delete(url, headers=admin, params={"id": ["e-1668-01-01", "nope"]})
    assert bad.status_code == 400 and "no document 'nope'" in bad.json()["detail"]
    assert len(col.snapshots()) == before
    resp = api.delete(url, headers=admin, params={"id": "e-1668-01-01"})
    assert resp.status_code == 201, resp.text
    built = resp.json()
    assert built["fromSnapshot"] == active and not built["activated"]
    new = built["snapshotId"]
    assert col.active_snapshot().snapshot_id == active  # inactive until activated (the gate)

    # a query may name the active snapshot (any key) or another one (admin keys only)
    query = {"query": "the theatre to see Macbeth", "mode": "keyword"}
    assert api.post(f"{BASE}/search", headers=reader,
                    json={**query, "snapshot": active}).status_code == 200
    denied = api.post(f"{BASE}/search", headers=reader, json={**query, "snapshot": new})
    assert denied.status_code == 403 and "admin" in denied.json()["detail"]
    assert api.get(f"{BASE}/documents", headers=reader,
                   params={"snapshot": new}).status_code == 403
    pinned = api.post(f"{BASE}/search", headers=admin, json={**query, "snapshot": new}).json()
    assert pinned["snapshotId"] == new
    assert all(h["id"] != "e-1668-01-01" for h in pinned["hits"])
    live = api.post(f"{BASE}/search", headers=admin, json=query).json()
    assert live["snapshotId"] == active and live["hits"][0]["id"].startswith("e-1668-01-01")
    answer = api.post(f"{BASE}/answer", headers=admin,
                      json={"question": "Macbeth", "snapshot": new}).json()
    assert answer["snapshotId"] == new
    listed = api.get(f"{BASE}/documents", headers=admin, params={"snapshot": new}).json()
    assert len(listed) == 11 and "e-1668-01-01" not in {d["id"] for d in listed}
    assert api.post(f"{BASE}/search", headers=admin,
                    json={**query, "snapshot": 999999}).status_code == 404
