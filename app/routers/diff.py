"""Routes of version diffs: ``/datasets/{name}/diff/{a}..{b}`` (tags redirect to ids), the compare form, pixel heatmaps."""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Request
from fastapi.responses import RedirectResponse, Response

from loaders import DatasetVersion
from loaders.catalog.store import check_name
from loaders.diff import VersionDiff, diff_versions
from loaders.media import image_info, pixel_diff

from .. import urls
from ..deps import CatalogDep, SettingsDep
from ..http_semantics import etag, immutable, not_modified, same_request_at
from ..pages.diff import DiffPage, b_spec, diff_page, diff_row_page, resolve_pair
from ..pages.media import MediaRequestError, load_field, require_kind
from ..responses import VARY, respond
from ..routing import bytes_answer, page
from ..settings import Settings
from .media import MediaDep

router = APIRouter(tags=["diff"])

Change = Literal["added", "removed", "changed", "edited"]
#: The engine refuses a threshold of 0; the setting allows it, meaning "pair any two rows".
_MIN_SIMILARITY = 1e-9


def _diff(settings: Settings, a: DatasetVersion, b: DatasetVersion) -> VersionDiff:
    return diff_versions(a, b, similarity=max(settings.diff_similarity, _MIN_SIMILARITY))


@page(
    router,
    "/datasets/{name}/diff/",
    summary="The compare form's target: redirects to the diff of versions a and b",
    redirect="To the diff of the two versions, by their ids",
)
def compare(
    request: Request,
    name: str,
    catalog: CatalogDep,
    a: Annotated[str, Query(min_length=1, max_length=300, description="The old version: tag, id prefix or id.")],
    b: Annotated[str, Query(min_length=1, max_length=300, description="The new version: tag, id prefix or id, or other-dataset@version.")],
) -> Response:
    check_name("dataset", name)
    first, second, _ = resolve_pair(catalog, name, f"{a}..{b}")
    target = urls.diff(name, first.id, b_spec(name, second))
    return RedirectResponse(urls.api(target) if urls.is_api(request.url.path) else target, status_code=307, headers=VARY)


@page(router, "/datasets/{name}/diff/{spec}", summary="What changed between two versions: summary, schema, shards, rows", model=DiffPage)
def diff(
    request: Request,
    name: str,
    spec: str,
    catalog: CatalogDep,
    settings: SettingsDep,
    cache: MediaDep,
    change: Annotated[Change | None, Query(description="Keep one type of row change.")] = None,
    column: Annotated[str | None, Query(max_length=1000, description="Keep changed and edited rows where this column differs.")] = None,
    after: Annotated[str | None, Query(max_length=10_000, description="Cursor: list the changes after this key.")] = None,
    key: Annotated[str | None, Query(max_length=10_000, description="Show the field-by-field difference of this changed row.")] = None,
) -> Response:
    check_name("dataset", name)
    a, b, is_canonical = resolve_pair(catalog, name, spec)
    if not is_canonical:
        raise same_request_at(request, urls.diff(name, a.id, b_spec(name, b)))
    result = _diff(settings, a, b)
    if key is not None:
        return respond(request, diff_row_page(catalog, cache, result, key), template="diff.html", block="detail")
    data = diff_page(result, change=change, column=column or None, after=after, page_size=settings.page_size)
    return respond(request, data, template="diff.html", block="rows")


@router.get(
    "/media/datasets/{name}/diff/{spec}/heatmap",
    summary="Per-pixel difference of an image field between two versions (PNG)",
    **bytes_answer("image/png", description="Black where equal, red to yellow to white as the pixels differ"),
)
def heatmap(
    request: Request,
    name: str,
    spec: str,
    catalog: CatalogDep,
    cache: MediaDep,
    key: Annotated[str, Query(max_length=10_000, description="The row's key in version A.")],
    field: Annotated[str, Query(max_length=1000, description="The image column.")],
    b_key: Annotated[
        str | None, Query(max_length=10_000, description="The row's key in version B, when it differs (keyless data).")
    ] = None,
) -> Response:
    check_name("dataset", name)
    a, b, is_canonical = resolve_pair(catalog, name, spec)
    if not is_canonical:
        raise same_request_at(request, urls.diff_heatmap(name, a.id, b_spec(name, b), key, field))
    other = b_key if b_key is not None else key
    tag = etag("diff-heatmap", a.id, b.id, key, other, field)
    cached = not_modified(request, tag)
    if cached is not None:
        return cached

    def make() -> bytes:
        first, second = load_field(a, key, field), load_field(b, other, field)
        require_kind(first, "image")
        require_kind(second, "image")
        a_bytes, b_bytes = first.image_bytes(), second.image_bytes()
        png = pixel_diff(a_bytes, b_bytes, where=f"{first.where} against {second.where}")
        if png is None:
            sizes = [image_info(data, where=m.where) for data, m in ((a_bytes, first), (b_bytes, second))]
            raise MediaRequestError(
                f"{first.where} is {sizes[0].width}×{sizes[0].height} and {second.where} is {sizes[1].width}×{sizes[1].height}: "
                "no pixel difference of images of different sizes"
            )
        return png

    return immutable(request, tag, lambda: cache.get_or_make(("diff-heatmap", a.id, b.id, key, other, field), make))
