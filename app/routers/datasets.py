"""Routes of datasets, versions and sample permalinks; a tag or id prefix in the URL redirects to the full version id."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import Response

from ..decode_budget import decode_budget
from ..deps import CatalogDep, FlagsDep, QueriesDep, RunsDep, SettingsDep
from ..http_semantics import KeyDep, VersionDep
from ..pages.datasets import DatasetPage, VersionPage, dataset_page, version_page
from ..pages.sample import SamplePage, sample_page
from ..responses import kept, respond, wants_fragment, wants_json
from ..routing import page

router = APIRouter(tags=["datasets"])

Cursor = Annotated[int | None, Query(ge=0, description="Record index: list from here (start) or up to here (end).")]


@page(router, "/datasets/{name}", summary="A dataset: versions and tags", model=DatasetPage)
def dataset(request: Request, name: str, catalog: CatalogDep) -> Response:
    return respond(request, dataset_page(catalog, name), template="dataset.html")


@page(router, "/datasets/{name}/versions/{version}", summary="A version: schema, stats, rows by cursor, search", model=VersionPage)
def version(
    request: Request,
    version: VersionDep,
    catalog: CatalogDep,
    settings: SettingsDep,
    pages: RunsDep,
    queries: QueriesDep,
    start: Cursor = None,
    end: Cursor = None,
    q: Annotated[str | None, Query(max_length=1000, description="Text to search for (case-insensitive).")] = None,
    column: Annotated[str | None, Query(max_length=1000, description="Text column to search.")] = None,
    sort: Annotated[
        str | None,
        Query(max_length=1000, description="List the rows sorted by this column (nulls last); the cursor counts rows in that order."),
    ] = None,
    desc: Annotated[bool, Query(description="Sort descending.")] = False,
) -> Response:
    def build() -> Response:
        data = version_page(
            catalog,
            version,
            start=start,
            end=end,
            q=q or None,
            column=column or None,
            page_size=settings.page_size,
            search_seconds=settings.search_seconds,
            budget=decode_budget(request),
            field_bytes=settings.field_bytes,
            sort=sort or None,
            desc=desc,
            queries=queries,
        )
        return respond(request, data, template="version.html", block="rows")

    if q or wants_json(request) or wants_fragment(request):
        return build()
    # A version never changes; only its tags can move, so they are part of the key.
    key = ("version", version.name, version.id, start, end, column, sort, desc, tuple(sorted(catalog.tags(version.name).items())))
    return kept(pages, key, build)


@page(router, "/datasets/{name}/versions/{version}/samples/{key:path}", summary="One sample: every field by kind", model=SamplePage)
def sample(
    request: Request,
    version: VersionDep,
    key: KeyDep,
    catalog: CatalogDep,
    flags: FlagsDep,
    settings: SettingsDep,
    runs: RunsDep,
    field: Annotated[str | None, Query(max_length=1000, description="Render only this field, in full.")] = None,
    q: Annotated[str | None, Query(max_length=1000, description="Text to highlight.")] = None,
    where_run: Annotated[str | None, Query(max_length=128, description="List only this run's reads of the sample.")] = None,
    where_epoch: Annotated[int, Query(ge=0, le=2**62, description="First epoch whose reads are listed.")] = 0,
) -> Response:
    data = sample_page(
        catalog,
        flags,
        version,
        key,
        only=field,
        highlight=q or None,
        collapse_chars=settings.text_collapse_chars,
        token_threshold=settings.token_fragment_threshold,
        budget=decode_budget(request),
        # An htmx request swaps in the fields only: the where-read panel is not asked for.
        open_run=None if wants_fragment(request) else (lambda run: runs.run(catalog, run)),
        where_run=where_run or None,
        where_epoch=where_epoch,
        field_bytes=settings.field_bytes,
    )
    return respond(request, data, template="sample.html", block="fields")
