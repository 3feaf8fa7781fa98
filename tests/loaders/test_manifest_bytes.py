"""Every byte of a manifest is in its version id or shown as unverified; parent chains with a cycle are refused; a tag
pointing at a version the dataset does not have is one line (404, CLI exit 2)."""

from __future__ import annotations

import base64
import json
import subprocess
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from app import urls
from app.factory import create_app
from app.settings import Settings
from loaders import Catalog, CatalogCorrupt
from loaders.catalog.manifest import Manifest
from loaders.errors import DanglingTag
from tests.corpus.server import batchscope
from tests.support.local_client import local_client


def _register(catalog: Catalog, tmp_path: Path, name: str, text: str, **options: object):
    path = tmp_path / f"{name}-{text}.parquet"
    pq.write_table(pa.table({"id": ["a", "b"], "text": [text, text + "!"]}), path)
    return catalog.register(name, [str(path)], key="id", **options)


def _manifest(catalog: Catalog, name: str, version_id: str) -> Path:
    return Path(catalog.root) / "datasets" / name / "versions" / f"{version_id}.json"


def _edit(path: Path, **changes: object) -> None:
    data = json.loads(path.read_text())
    data.update(changes)
    path.write_text(json.dumps(data))


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return Catalog(tmp_path / "catalog")


def test_notes_and_the_exact_schema_are_in_the_id(catalog: Catalog, tmp_path: Path) -> None:
    version = _register(catalog, tmp_path, "d", "x", notes={"actions": ["left", "right"]})
    path = _manifest(catalog, "d", version.id)
    honest = path.read_text()
    _edit(path, notes={"actions": ["right", "left"]})
    with pytest.raises(CatalogCorrupt, match="does not match its id"):
        catalog.resolve("d")
    path.write_text(honest)
    data = json.loads(honest)
    schema = pa.ipc.read_schema(pa.py_buffer(base64.b64decode(data["schema"]["arrow"])))
    relabelled = schema.with_metadata({b"huggingface": b'{"info": {"features": {"label": {"names": ["cat", "dog"]}}}}'})
    data["schema"]["arrow"] = base64.b64encode(relabelled.serialize().to_pybytes()).decode()
    path.write_text(json.dumps(data))
    with pytest.raises(CatalogCorrupt, match="does not match its id"):
        catalog.resolve("d")
    path.write_text(honest)
    assert catalog.resolve("d").manifest.unverified == ("created", "parent")


def test_created_and_parent_are_outside_the_id_and_served_as_unverified(catalog: Catalog, tmp_path: Path) -> None:
    first = _register(catalog, tmp_path, "d", "x")
    second = _register(catalog, tmp_path, "d", "y")
    _edit(_manifest(catalog, "d", second.id), created="1999-01-01T00:00:00+00:00")
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    page = client.get(urls.api(urls.version("d", second.id))).json()
    assert page["created"].startswith("1999") and page["parent"] == first.id
    assert page["unverified"] == ["created", "parent"]
    listing = client.get(urls.api(urls.dataset("d"))).json()
    assert all(v["unverified"] == ["created", "parent"] for v in listing["versions"])
    html = client.get(urls.version("d", second.id)).text
    assert html.count('class="badge">unverified') >= 2


def test_a_manifest_registered_before_ids_covered_notes_loads_with_them_unverified(catalog: Catalog, tmp_path: Path) -> None:
    version = _register(catalog, tmp_path, "d", "x", notes={"source": "somewhere"})
    path = _manifest(catalog, "d", version.id)
    data = json.loads(path.read_text())
    legacy = Manifest.from_json(data, covers_meta=False)
    path.unlink()
    data.update(id=legacy.id, format="batchscope.dataset/1")
    _manifest(catalog, "d", legacy.id).write_text(json.dumps(data))
    loaded = catalog.resolve(f"d@{legacy.id}")
    assert loaded.manifest.unverified == ("created", "parent", "notes", "column metadata")
    _edit(_manifest(catalog, "d", legacy.id), notes={"source": "edited"})  # outside that id: loads, still unverified
    assert catalog.resolve(f"d@{legacy.id}").manifest.notes == {"source": "edited"}


def test_a_parent_cycle_is_refused_everywhere_parents_are_shown(catalog: Catalog, tmp_path: Path) -> None:
    first = _register(catalog, tmp_path, "d", "x")
    second = _register(catalog, tmp_path, "d", "y")
    _edit(_manifest(catalog, "d", first.id), parent=second.id)  # v1 ↔ v2
    assert catalog.parent(catalog.resolve(f"d@{second.id}"))[0] is None
    parent, refused = catalog.parent(catalog.resolve(f"d@{first.id}"))
    assert parent is None and "returns to a version it passed" in refused
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    page = client.get(urls.api(urls.version("d", second.id))).json()
    assert page["parent"] is None and page["parent_url"] is None and "refused" in page["parent_refused"]
    listing = client.get(urls.api(urls.dataset("d"))).json()
    assert [(v["parent"], v["parent_refused"] is not None) for v in listing["versions"]] == [(None, True), (None, True)]
    _edit(_manifest(catalog, "d", first.id), parent="0" * 32)  # a parent the dataset does not have
    assert "not a readable version" in catalog.parent(catalog.resolve(f"d@{second.id}"))[1]
    listed = subprocess.run([batchscope(), "versions", "d", "--root", catalog.root], capture_output=True, text=True, timeout=120)
    assert listed.returncode == 0 and "refused" in listed.stdout


@pytest.mark.parametrize("target", ["missing", "foreign"])
def test_a_tag_to_a_missing_or_foreign_id_is_one_line(catalog: Catalog, tmp_path: Path, target: str) -> None:
    _register(catalog, tmp_path, "d", "x")
    other = _register(catalog, tmp_path, "e", "y")
    refs = Path(catalog.root) / "datasets" / "d" / "refs.json"
    data = json.loads(refs.read_text())
    data["tags"]["v9"] = "f" * 32 if target == "missing" else other.id
    refs.write_text(json.dumps(data))
    with pytest.raises(DanglingTag) as info:
        catalog.resolve("d@v9")
    assert str(refs) in info.value.message and "'v9'" in info.value.message and "does not have" in info.value.message
    client = local_client(create_app(Settings(root=catalog.root, flags_path=str(tmp_path / "f.sqlite"))))
    answer = client.get(urls.api(urls.version("d", "v9")), follow_redirects=False)
    assert answer.status_code == 404 and answer.json()["error"] == info.value.message
    assert client.get(urls.version("d", "v9"), follow_redirects=False).status_code == 404
    command = ["tag", "d@v9", "other"] if target == "missing" else ["diff", "d@v9", "d@latest"]
    ran = subprocess.run([batchscope(), *command, "--root", catalog.root], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 2 and "Traceback" not in ran.stderr and "does not have" in ran.stderr, (command, ran.stderr)
    assert catalog.resolve("d").rows == 2  # the other tags still work
