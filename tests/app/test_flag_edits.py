"""Flags can be edited and deleted: from the flag page's forms (htmx or plain, with the form token), with PATCH and
DELETE on the flag's JSON, and from the CLI; every state change refuses another site."""

from __future__ import annotations

from typing import Any

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from app import urls
from app.cli import app as cli
from loaders import Catalog
from tests.app.dom import form_token, soup

HX = {"HX-Request": "true"}


def _flag(client: TestClient, key: str = "doc-4", **extra: Any) -> dict[str, Any]:
    body = {"dataset": "docs", "version": "v1", "key": key, "note": "first note", "tags": ["spam"], **extra}
    response = client.post(urls.api(urls.flags()), json=body)
    assert response.status_code == 201, response.text
    return response.json()


def test_the_flag_page_edits_note_and_tags_in_place(client: TestClient) -> None:
    flag = _flag(client, run=None)
    page = soup(client.get(urls.flag(flag["id"])))
    edit = page.select_one("form.flag-edit")
    assert edit["action"] == edit["hx-post"] == urls.flag_edit(flag["id"]) and edit["hx-target"] == "#flag-panel"
    fields = {i["name"]: i.get("value", "") for i in edit.select("input")}
    assert fields == {"csrf_token": form_token(client), "note": "first note", "tags": "spam"}
    answer = client.post(urls.flag_edit(flag["id"]), data={**fields, "note": "mask shifted", "tags": "bad-mask, review"}, headers=HX)
    assert answer.status_code == 200
    panel = soup(answer).select_one("#flag-panel")
    assert panel.select_one("dd.note").get_text() == "mask shifted" and panel.select_one("[role=status]").get_text() == "saved"
    assert [a.get_text() for a in panel.select("dd.flag-tags a")] == ["bad-mask", "review"] and panel.select_one("dd.flag-updated")
    stored = client.get(urls.api(urls.flag(flag["id"]))).json()["flag"]
    assert (stored["note"], stored["tags"], stored["key"], stored["created"]) == (
        "mask shifted",
        ["bad-mask", "review"],
        "doc-4",
        flag["created"],
    )
    assert stored["updated"] is not None
    # A bad tag is refused inline and changes nothing.
    refused = client.post(urls.flag_edit(flag["id"]), data={**fields, "tags": "no spaces allowed?"}, headers=HX)
    assert refused.status_code == 422 and "invalid tag" in soup(refused).select_one("[role=alert]").get_text()
    assert client.get(urls.api(urls.flag(flag["id"]))).json()["flag"]["tags"] == ["bad-mask", "review"]
    # Without JavaScript the form posts and lands back on the flag.
    plain = client.post(urls.flag_edit(flag["id"]), data={**fields, "note": "plain"})
    assert plain.status_code == 303 and plain.headers["location"] == urls.flag(flag["id"])


def test_the_flag_page_deletes_the_flag(client: TestClient) -> None:
    flag = _flag(client)
    delete = soup(client.get(urls.flag(flag["id"]))).select_one("form.flag-delete")
    assert delete["action"] == urls.flag_delete(flag["id"]) and delete["hx-confirm"] == f"Delete flag #{flag['id']}?"
    answer = client.post(urls.flag_delete(flag["id"]), data={"csrf_token": form_token(client)}, headers=HX)
    assert answer.status_code == 200 and answer.headers["hx-redirect"] == urls.flags()
    assert client.get(urls.api(urls.flag(flag["id"]))).status_code == 404
    assert client.get(urls.api(urls.flags())).json()["total"] == 0
    again = _flag(client)
    plain = client.post(urls.flag_delete(again["id"]), data={"csrf_token": form_token(client)})
    assert plain.status_code == 303 and plain.headers["location"] == urls.flags()


def test_patch_and_delete_on_the_flags_json(client: TestClient) -> None:
    flag = _flag(client)
    edited = client.patch(urls.api(urls.flag(flag["id"])), json={"tags": "dup, spam"})
    assert edited.status_code == 200 and (edited.json()["note"], edited.json()["tags"]) == ("first note", ["dup", "spam"])
    assert client.patch(urls.api(urls.flag(flag["id"])), json={"note": "x" * 10_001}).status_code == 422
    gone = client.delete(urls.api(urls.flag(flag["id"])))
    assert gone.status_code == 200 and gone.json()["id"] == flag["id"]
    missing = client.delete(urls.api(urls.flag(flag["id"])))
    assert missing.status_code == 404 and f"no flag {flag['id']}" in missing.json()["error"]


def test_edits_and_deletes_from_another_site_are_refused_and_change_nothing(client: TestClient) -> None:
    flag = _flag(client)
    evil = {"Origin": "http://evil.example"}
    assert client.patch(urls.api(urls.flag(flag["id"])), json={"note": "pwned"}, headers=evil).status_code == 403
    assert client.delete(urls.api(urls.flag(flag["id"])), headers={"Sec-Fetch-Site": "cross-site"}).status_code == 403
    assert client.post(urls.flag_edit(flag["id"]), data={"note": "pwned"}).status_code == 403  # no form token
    assert client.post(urls.flag_delete(flag["id"]), data={"csrf_token": "0" * 32}).status_code == 403
    assert client.get(urls.api(urls.flag(flag["id"]))).json()["flag"]["note"] == "first note"


def test_the_cli_edits_and_deletes_flags(client: TestClient, inspector_catalog: Catalog, tmp_path: Any) -> None:
    flags = str(tmp_path / "flags.sqlite")  # the database the client fixture uses
    flag = _flag(client)
    env = {"BATCHSCOPE_FLAGS_PATH": flags}
    edited = CliRunner().invoke(cli, ["flags", "edit", str(flag["id"]), "--note", "via cli", "--root", inspector_catalog.root], env=env)
    assert edited.exit_code == 0 and f"flag #{flag['id']}: via cli [spam]" in edited.output
    nothing = CliRunner().invoke(cli, ["flags", "edit", str(flag["id"]), "--root", inspector_catalog.root], env=env)
    assert nothing.exit_code == 2 and "give --note, --tags or both" in nothing.output
    deleted = CliRunner().invoke(cli, ["flags", "delete", str(flag["id"]), "--root", inspector_catalog.root], env=env)
    assert deleted.exit_code == 0 and f"deleted flag #{flag['id']}" in deleted.output
    again = CliRunner().invoke(cli, ["flags", "delete", str(flag["id"]), "--root", inspector_catalog.root], env=env)
    assert again.exit_code == 2 and f"no flag {flag['id']}" in again.output
    assert client.get(urls.api(urls.flags())).json()["total"] == 0
