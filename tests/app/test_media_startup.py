"""Starting the app (as servers do) loads every template and prepares every route, so a first page pays only for its data."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import jinja2
import pytest

from app import urls
from app.factory import create_app, warm
from app.settings import Settings
from app.templating import TEMPLATES_DIR, Templates
from tests.app.dom import soup
from tests.app.test_media_catalog import MediaCatalog, build_media_catalog
from tests.support.local_client import local_client


@pytest.fixture(scope="module")
def media(tmp_path_factory: pytest.TempPathFactory) -> MediaCatalog:
    return build_media_catalog(tmp_path_factory.mktemp("media-startup"))


def test_startup_loads_every_template_before_the_first_request(media: MediaCatalog, tmp_path: Path) -> None:
    app = create_app(Settings(root=media.catalog.root, flags_path=str(tmp_path / "f.sqlite")))
    on_disk = {str(p.relative_to(TEMPLATES_DIR)) for p in TEMPLATES_DIR.rglob("*.html")}
    assert not app.state.templates.env.cache, "nothing is loaded before the app starts"
    with local_client(app) as client:  # runs the lifespan, as uvicorn does
        loaded = {template.name for template in app.state.templates.env.cache.values()}
        assert loaded == on_disk
        assert app.openapi_schema is not None
        page = client.get(urls.rank(media.run, 0, 0))
        assert page.status_code == 200 and soup(page).select("article.sample")


def test_templates_are_compiled_once_per_process(monkeypatch: pytest.MonkeyPatch) -> None:
    Templates().warm()  # compiled here at the latest
    compiled: list[str | None] = []
    original = jinja2.Environment.compile

    def counting(self: jinja2.Environment, source: str, name: str | None = None, *args: object, **kwargs: object) -> object:
        compiled.append(name)
        return original(self, source, name, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(jinja2.Environment, "compile", counting)
    again = Templates()
    assert again.warm() == len(list(TEMPLATES_DIR.rglob("*.html")))
    assert compiled == [], "a new app's templates come from the process's compiled code"
    html = again.render("_partials/_scalar.html", {"view": SimpleNamespace(type="int", text="7")})
    assert html == '<span class="scalar mono" data-type="int">7</span>'


def test_a_failing_warm_up_does_not_stop_the_server(media: MediaCatalog, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    app = create_app(Settings(root=media.catalog.root, flags_path=str(tmp_path / "f.sqlite")))

    def broken() -> int:
        raise jinja2.TemplateSyntaxError("unexpected end of template", 1)

    monkeypatch.setattr(app.state.templates, "warm", broken)
    with pytest.raises(jinja2.TemplateSyntaxError):
        warm(app)
    with local_client(app) as client:
        assert client.get(urls.rank(media.run, 0, 0)).status_code == 200
