"""Every field kind has every part: its spec (loaders), renderers, the partials of their views on disk, and a diff view."""

from __future__ import annotations

import io
import math

import numpy as np
import pytest
from PIL import Image

from app import urls
from app.registries import DuplicateEntry, unique
from app.renderers import kinds as table
from app.renderers.diff import ImageDiffView, StructDiffView, TextDiffView, TokenDiffView, ValueDiffView, VideoDiffView
from app.renderers.kinds import FALLBACK, MODEL_INPUT_KINDS, NULL, PRESENTATIONS, Presentation, presentation
from app.renderers.registry import ErrorView, FieldContext, render_cell, render_field
from app.templating import TEMPLATES_DIR
from loaders.catalog.kinds import DIFF_MEDIA, KINDS, PICTURE_KINDS, SPEC
from loaders.diff import field_diff
from loaders.media import encode_video
from tests.loaders.test_kinds import CHANGED
from tests.support.peers import wav


def _png() -> bytes:
    out = io.BytesIO()
    Image.new("RGB", (4, 3), "red").save(out, format="PNG")
    return out.getvalue()


SOURCE = {"dataset": "d", "version": "v" * 64, "key": "k", "field": "clip"}
#: A value of each kind that its renderers can show.
VALUES = {
    "text": "hello world",
    "tokens": [1, 2, 3],
    "mask": [0, 1, 1],
    "labels": [-100, 2, 3],
    "chat": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}],
    "image": _png(),
    "video": encode_video([np.zeros((32, 32, 3), np.uint8)] * 4, fps=24),
    "audio": wav(),
    "class_label": 1,
    "episode": {"actions": [0, 1], "rewards": [0.0, 1.0], "dones": [False, True]},
    "rollout": {"prompt": "2+2?", "completion": "4", "reward": 1.0, "advantage": 0.5, "group_id": "g"},
    "json": {"a": [1, 2]},
    "scalar": 3.5,
    "binary": b"\x00\x01",
    "model_frames": {**SOURCE, "frame_indices": [0, 2], "frame_times": [0.0, 0.1]},
    "model_image": {**SOURCE, "crop_box": [0, 0, 2, 2], "size": [2, 2], "source_size": [4, 3]},
}


def _ctx(kind: str) -> FieldContext:
    media = urls.media("d", "v" * 64, "k", "c")
    return FieldContext("c", kind, {"c": VALUES.get(kind)}, {"c": kind}, class_names=("cat", "dog"), media_url=media, where="here")


def test_every_kind_of_the_read_path_has_a_presentation_and_nothing_else_does() -> None:
    assert set(KINDS) <= set(PRESENTATIONS)
    assert set(PRESENTATIONS) - set(KINDS) == {*MODEL_INPUT_KINDS, NULL}
    assert presentation("a kind from the future") is FALLBACK


@pytest.mark.parametrize("kind", [*PRESENTATIONS, FALLBACK.kind])
def test_every_kind_has_every_part(kind: str) -> None:
    shown = presentation(kind)
    assert shown.kind == kind and callable(shown.field) and callable(shown.cell)
    assert shown.views and shown.cell_views
    for view in (*shown.views, *shown.cell_views, *([shown.diff] if shown.diff else [])):
        assert (TEMPLATES_DIR / view.partial).is_file(), f"{kind}: {view.__name__}.partial {view.partial} is not a template"
    assert (shown.diff is not None) == (kind in KINDS)


@pytest.mark.parametrize("kind", sorted(VALUES))
def test_each_renderer_makes_the_views_its_kind_declares(kind: str) -> None:
    shown = presentation(kind)
    field, cell = render_field(VALUES[kind], _ctx(kind)), render_cell(VALUES[kind], _ctx(kind))
    assert not isinstance(field, ErrorView) and not isinstance(cell, ErrorView), (field, cell)
    assert type(field) in shown.views and type(cell) in shown.cell_views


def test_null_values_and_unknown_kinds_have_declared_renderers() -> None:
    assert render_field(None, _ctx("text")).text == "null"  # type: ignore[attr-defined]
    assert [type(render_field(v, _ctx("future"))) for v in (b"x", [1], 2)] == list(FALLBACK.views)


@pytest.mark.parametrize("kind", list(KINDS))
def test_the_diff_view_of_each_kind_fits_what_the_diff_engine_finds(kind: str) -> None:
    found = field_diff("c", kind, *CHANGED[kind])
    if SPEC[kind].diff == DIFF_MEDIA and kind in PICTURE_KINDS:
        expected = {"image": ImageDiffView, "video": VideoDiffView}[kind]
    elif found.words:
        expected = TextDiffView
    elif found.ops:
        expected = TokenDiffView
    elif found.paths:
        expected = StructDiffView
    else:
        expected = ValueDiffView
    assert presentation(kind).diff is expected


def test_a_kind_listed_twice_or_without_a_presentation_fails_naming_it(monkeypatch: pytest.MonkeyPatch) -> None:
    text = PRESENTATIONS["text"]
    with pytest.raises(DuplicateEntry, match="presentation of kind 'text' is listed twice"):
        unique([text, PRESENTATIONS["json"], text], name=lambda p: p.kind, what="presentation of kind")
    monkeypatch.setattr(table, "KINDS", {**KINDS, "hologram": "a new kind"})
    with pytest.raises(LookupError, match="hologram of loaders.catalog.kinds have no presentation"):
        table._check()
    monkeypatch.setattr(table, "KINDS", KINDS)
    monkeypatch.setitem(PRESENTATIONS, "scalar", Presentation("scalar", text.field, text.cell, text.views, text.cell_views, None))
    with pytest.raises(LookupError, match="scalar have no diff view"):
        table._check()


def test_nan_and_infinite_scalars_still_render() -> None:
    assert [render_field(v, _ctx("scalar")).text for v in (math.nan, math.inf)] == ["nan", "inf"]  # type: ignore[attr-defined]
