"""The HTTP service against the real server: keys and roles, per-collection isolation (down to
the database role), input limits, search/answer bodies, admin plane, health and metrics."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from fastapi.testclient import TestClient
from psycopg import sql

import pgcite
from pgcite.service import ServiceConfig, create_app, create_key, read_role, revoke_key

OTHER_DOCS = [
    {"_id": "o-1", "date": "1700-01-01", "corpus": "A", "author": "Someone Else",
     "text": "A private ledger entry about the harbour and its ships."},
    {"_id": "o-2", "date": "1700-02-01", "corpus": "A", "author": "Someone Else",
     "text": "The harbour froze and no ship could sail for a week."},
]


@pytest.fixture(scope="module")
def other(client: pgcite.Client, tmp_path_factory: pytest.TempPathFactory) -> pgcite.Collection:
    path = tmp_path_factory.mktemp("other") / "other.jsonl"
    path.write_text("".join(json.dumps(d) + "\n" for d in OTHER_DOCS))
    col = client.create_collection("svc_other")
    assert col.ingest([path]).activated
    return col


def _token(client: pgcite.Client, collection: str, role: str) -> str:
    with client.db.transaction() as conn:
        return create_key(conn, collection, role).token


@pytest.fixture(scope="module")
def api(client: pgcite.Client, diary: pgcite.Collection,
        other: pgcite.Collection) -> Iterator[TestClient]:
    app = create_app(client=client, config=ServiceConfig(warm_up=False))
    with TestClient(app) as test_client:
        yield test_client


@pytest.fixture(scope="module")
def reader(client: pgcite.Client, diary: pgcite.Collection) -> dict[str, str]:
    return {"Authorization": f"Bearer {_token(client, diary.name, 'reader')}"}


@pytest.fixture(scope="module")
def other_admin(client: pgcite.Client, other: pgcite.Collection) -> dict[str, str]:
    return {"X-API-Key": _token(client, other.name, "admin")}


def test_health_ready_docs(api: TestClient) -> None:
    assert api.get("/healthz").json() == {"status": "ok"}
    assert api.get("/readyz").status_code == 200
    spec = api.get("/openapi.json").json()
    assert "/v1/collections/{collection}/answer" in spec["paths"]
    assert api.get("/docs").status_code == 200


def test_answer_over_http(api: TestClient, reader: dict[str, str]) -> None:
    resp = api.post("/v1/collections/diary_fixture/answer", headers=reader,
                    json={"question": "Where did Pepys bury his Parmazan cheese?"})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert {"answer", "abstained", "snapshotId", "embeddingModel", "sources", "citations",
            "generator", "trace"} <= set(body)
    assert not body["abstained"] and body["generator"] == "extractive" and body["citations"]
    ids = {s["id"] for s in body["sources"]}
    assert set(body["citations"]) <= ids
    assert set(body["sources"][0]) >= {"id", "citation", "source", "locator", "distance",
                                       "score", "excerpt", "author", "corpus", "date"}


def test_cutoff_answer_over_http(api: TestClient, reader: dict[str, str]) -> None:
    body = api.post("/v1/collections/diary_fixture/answer", headers=reader, json={
        "question": "What happened during the great fire?", "cutoff": "1666-09-03",
        "generator": "extractive"}).json()
    dates = {s["id"]: s["date"] for s in body["sources"]}
    assert body["citations"] and all(dates[c] <= "1666-09-03" for c in body["citations"])


def test_abstains_over_http(api: TestClient, reader: dict[str, str]) -> None:
    body = api.post("/v1/collections/diary_fixture/answer", headers=reader, json={
        "question": "What did Pepys think of Newton's gravity?", "threshold": 0.99}).json()
    assert body["abstained"] and body["citations"] == [] and body["generator"] == "none"


def test_search_over_http(api: TestClient, reader: dict[str, str]) -> None:
    resp = api.post("/v1/collections/diary_fixture/search", headers=reader, json={
        "query": "fire", "top_k": 3, "mode": "keyword", "corpora": ["A"],
        "filters": {"metadata": [{"key": "year", "op": "gte", "value": 1666}]}})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["snapshotId"] and 0 < len(body["hits"]) <= 3
    assert all(h["corpus"] == "A" and h["metadata"]["year"] >= 1666 for h in body["hits"])


def test_keys_are_required_and_scoped(api: TestClient, client: pgcite.Client,
                                      reader: dict[str, str], other_admin: dict[str, str]) -> None:
    url = "/v1/collections/diary_fixture/search"
    assert api.post(url, json={"query": "fire"}).status_code == 401
    bad = {"Authorization": "Bearer pgc_000000000000_" + "x" * 43}
    assert api.post(url, headers=bad, json={"query": "fire"}).status_code == 401
    # another existing collection and an unknown one look the same to a key holder (same
    # status, same body): a key cannot confirm names; 404 for everyone
    other = api.post(url, headers=other_admin, json={"query": "fire"})
    unknown = api.post("/v1/collections/no_such_one/search", headers=other_admin,
                       json={"query": "fire"})
    assert other.status_code == unknown.status_code == 404 and "svc_other" not in other.text
    assert other.json()["detail"] == "no collection named 'diary_fixture'"
    assert unknown.json() == {"detail": "no collection named 'no_such_one'"} == {
        "detail": other.json()["detail"].replace("diary_fixture", "no_such_one")}
    for name in ("nope", "Bad-Name!"):
        resp = api.post(f"/v1/collections/{name}/search", headers=reader, json={"query": "x"})
        assert resp.status_code == 404 and resp.json()["detail"] == f"no collection named {name!r}"
    # readers cannot administer
    assert api.get("/v1/collections/diary_fixture/snapshots", headers=reader).status_code == 403
    names = [c["name"] for c in api.get("/v1/collections", headers=reader).json()]
    assert names == ["diary_fixture"]


def test_revoked_key_stops_working(api: TestClient, client: pgcite.Client) -> None:
    with client.db.transaction() as conn:
        new = create_key(conn, "diary_fixture", "reader")
    headers = {"Authorization": f"Bearer {new.token}"}
    assert api.get("/v1/collections", headers=headers).status_code == 200
    with client.db.transaction() as conn:
        revoke_key(conn, new.key.key_id)
    assert api.get("/v1/collections", headers=headers).status_code == 401
    with client.connection() as conn:  # only the hash is stored
        stored = conn.execute("SELECT key_sha256 FROM pgcite.api_keys WHERE key_id = %s",
                              (new.key.key_id,)).fetchone()
    assert stored is not None and new.token.encode() not in bytes(stored[0])


def test_read_role_cannot_see_another_collection(api: TestClient, client: pgcite.Client,
                                                 diary: pgcite.Collection,
                                                 other: pgcite.Collection,
                                                 reader: dict[str, str]) -> None:
    api.post("/v1/collections/diary_fixture/search", headers=reader, json={"query": "fire"})
    role = sql.Identifier(read_role(diary.info))
    with client.connection() as conn:
        with conn.transaction():
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(role))
            assert conn.execute("SELECT count(*) FROM pgc_diary_fixture.chunks").fetchone()
        for table in ("pgc_svc_other.chunks", "pgcite.api_keys", "pgcite.collections"):
            with pytest.raises(psycopg.errors.InsufficientPrivilege, match="permission denied"), \
                    conn.transaction():
                conn.execute(sql.SQL("SET LOCAL ROLE {}").format(role))
                conn.execute(sql.SQL("SELECT count(*) FROM {}").format(
                    sql.Identifier(*table.split("."))))
        with pytest.raises(psycopg.errors.InsufficientPrivilege), conn.transaction():
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(role))
            conn.execute("DELETE FROM pgc_diary_fixture.chunks")
        assert conn.execute("SELECT current_user <> %s", (read_role(diary.info),)).fetchone()


@pytest.mark.parametrize(("body", "fragment"), [
    ({"question": "x" * 2001}, "2000"),
    ({"question": "fire", "top_k": 101}, "100"),
    ({"question": "fire", "top_k": 0}, "1"),
    ({"question": ""}, "at least 1"),
    ({"question": "fire\u0000"}, "NUL"),
    ({"question": "fire", "filters": {"metadata": [{"key": "year", "value": 1}] * 33}}, "32"),
    ({"question": "fire", "filters": {"and": [{"corpora": ["A"]}]}}, "and"),
    ({"question": "fire", "filters": {"metadata": [{"key": "y", "value": {"a": 1}}]}}, "value"),
    ({"question": "fire", "mode": "fuzzy"}, "mode"),
    ({"question": "fire", "sql": "DROP"}, "sql"),
])
def test_input_limits_are_4xx_with_a_message(api: TestClient, reader: dict[str, str],
                                             body: dict[str, object], fragment: str) -> None:
    resp = api.post("/v1/collections/diary_fixture/answer", headers=reader, json=body)
    assert resp.status_code == 422 and fragment in resp.text


def test_unknown_filter_field_and_bad_stages_are_400(api: TestClient, reader: dict[str, str]) -> None:
    resp = api.post("/v1/collections/diary_fixture/search", headers=reader, json={
        "query": "fire", "filters": {"metadata": [{"key": "yeer", "value": 1}]}})
    assert resp.status_code == 400 and "unknown metadata field 'yeer'" in resp.json()["detail"]
    resp = api.post("/v1/collections/diary_fixture/search", headers=reader, json={
        "query": "fire", "stages": {"boosts": [{"kind": "field", "field": "corpus"}]}})
    assert resp.status_code == 400 and "bad stage options" in resp.json()["detail"]


def test_stages_and_self_checks_over_http(api: TestClient, reader: dict[str, str]) -> None:
    resp = api.post("/v1/collections/diary_fixture/search", headers=reader, json={
        "query": "fire in the City", "rerank": True, "stages": {"route": False, "boosts": [
            {"kind": "field", "field": "corpus", "equals": "B", "multiplier": 10}]}})
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["hits"][0]["corpus"] == "B"
    assert [(s["stage"], s["outcome"]) for s in body["stages"]] == [
        ("boost", "applied"), ("rerank", "skipped")]
    resp = api.post("/v1/collections/diary_fixture/answer", headers=reader, json={
        "question": "Where did the great fire begin?", "self_check": {"grade": True}})
    assert resp.status_code == 200, resp.text
    assert {"step": "grade", "detail": "skipped: no LLM configured"} in resp.json()["trace"]
    routed = api.post("/v1/collections/diary_fixture/search", headers=reader,
                      json={"query": "Parmazan"}).json()
    assert routed["stages"][0]["stage"] == "route"  # on by default; the route and why
    assert routed["stages"][0]["detail"].startswith("keyword (heuristic)")
    metrics = api.get("/metrics").text
    assert 'pgcite_routes_total{route="keyword"}' in metrics
    assert 'pgcite_stage_outcomes_total{outcome="skipped",stage="rerank"}' in metrics
    assert 'pgcite_stage_outcomes_total{outcome="skipped",stage="grade"}' in metrics


def test_admin_upload_list_activate(api: TestClient, other_admin: dict[str, str],
                                    tmp_path: Path) -> None:
    base = "/v1/collections/svc_other"
    doc = {"_id": "o-3", "date": "1700-03-01", "text": "Whales were seen in the frozen harbour."}
    resp = api.post(f"{base}/documents", headers=other_admin, data={"author": "Uploader"},
                    files={"files": ("../../etc/new.jsonl", json.dumps(doc) + "\n")})
    assert resp.status_code == 201, resp.text
    upload = resp.json()
    assert upload["files"] == ["new.jsonl"] and not upload["activated"]
    new_id = upload["snapshotId"]
    snaps = api.get(f"{base}/snapshots", headers=other_admin).json()
    assert [s["active"] for s in snaps if s["snapshotId"] == new_id] == [False]
    search = {"query": "whales", "mode": "keyword"}
    assert api.post(f"{base}/search", headers=other_admin, json=search).json()["hits"] == []
    resp = api.post(f"{base}/snapshots/{new_id}/activate", headers=other_admin)
    assert resp.status_code == 200 and resp.json()["activeSnapshot"] == new_id
    hits = api.post(f"{base}/search", headers=other_admin, json=search).json()["hits"]
    assert [h["author"] for h in hits] == ["Uploader"]
    assert api.post(f"{base}/snapshots/999999/activate", headers=other_admin).status_code == 404
    bad = api.post(f"{base}/documents", headers=other_admin,
                   files={"files": ("run.exe", b"MZ")})
    assert bad.status_code == 415


def test_metrics_count_requests_and_stages(api: TestClient, reader: dict[str, str]) -> None:
    api.post("/v1/collections/diary_fixture/answer", headers=reader, json={"question": "fire"})
    text = api.get("/metrics").text
    assert 'pgcite_http_requests_total{method="POST",route="/v1/collections/{collection}/answer"' \
        in text
    assert 'pgcite_stage_duration_seconds_bucket{le="0.005",stage="retrieve"}' in text
    assert "pgcite_answers_total" in text


def test_no_auth_mode_reads_through_the_read_role(client: pgcite.Client,
                                                  diary: pgcite.Collection) -> None:
    app = create_app(client=client, config=ServiceConfig(auth=False, warm_up=True))
    with TestClient(app) as api:
        names = {c["name"] for c in api.get("/v1/collections").json()}
        assert {"diary_fixture", "svc_other"} <= names
        assert api.post("/v1/collections/diary_fixture/search",
                        json={"query": "fire"}).status_code == 200


def test_key_commands(settings: pgcite.Settings, other: pgcite.Collection,
                      api: TestClient) -> None:
    from typer.testing import CliRunner

    from pgcite.cli import app

    def cli(*args: str) -> str:
        result = CliRunner().invoke(app, ["--data-dir", str(settings.data_dir), "key", *args])
        assert result.exit_code == 0, result.output
        return result.output

    made = json.loads(cli("create", "--collection", "svc_other", "--role", "reader", "--json"))
    token, key_id = made["token"], made["key"]["keyId"]
    headers = {"X-API-Key": token}
    assert api.get("/v1/collections", headers=headers).status_code == 200
    listed = json.loads(cli("list", "--collection", "svc_other", "--json"))
    assert key_id in {k["keyId"] for k in listed} and token not in json.dumps(listed)
    assert json.loads(cli("revoke", key_id, "--json"))["revokedAt"]
    assert api.get("/v1/collections", headers=headers).status_code == 401
    missing = CliRunner().invoke(app, ["--data-dir", str(settings.data_dir), "key", "create",
                                       "--collection", "nope"])
    assert missing.exit_code != 0 and "no collection named 'nope'" in missing.output
