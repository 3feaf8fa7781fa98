"""Routes of flags: the list and one flag (pages + JSON), flagging from a form (htmx) or JSON, editing and deleting a
flag (its page's forms, or PATCH and DELETE on its JSON), and exports."""

from __future__ import annotations

import itertools
import json
from typing import Annotated, Iterator

from fastapi import APIRouter, Form, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse, RedirectResponse, Response, StreamingResponse
from pydantic import BaseModel, Field

from loaders import Catalog
from loaders.catalog.exclude import write_key_file
from loaders.catalog.store import check_name
from loaders.errors import BatchscopeError

from .. import urls
from ..deps import CatalogDep, FlagsDep, RunsDep
from ..errors import ERROR_RESPONSES
from ..flags import Flag, FlagFilter, FlagNotFound, FlagStore
from ..jsonable import jsonable
from ..pages.flags import FlagPage, FlagsPage, flag_page, flag_view, flags_page
from ..pages.sample import FlagForm, flag_form
from ..responses import VARY, respond, wants_fragment
from ..routing import bytes_answer, page
from ..schemas import response_model

router = APIRouter(tags=["flags"], responses=ERROR_RESPONSES)

#: Largest integer SQLite stores; bigger numbers are refused as malformed instead of failing in the database.
MAX_INT = 2**63 - 1
Name = Annotated[str | None, Query(max_length=128, description="Only flags of this dataset.")]
Tag = Annotated[str | None, Query(max_length=64, description="Only flags with this tag.")]


class FlagIn(BaseModel):
    """A flag to store: which sample, why, and optionally where in a run it was seen."""

    dataset: str = Field(max_length=128)
    version: str = Field(max_length=64, description="Version id, id prefix or tag (stored as the full id).")
    key: str = Field(max_length=100_000)
    note: str = Field(default="", max_length=10_000)
    tags: list[str] | str = Field(default_factory=list)
    run: str | None = Field(default=None, max_length=128)
    step: int | None = Field(default=None, ge=0, le=MAX_INT)
    rank: int | None = Field(default=None, ge=0, le=MAX_INT)
    index: int | None = Field(default=None, ge=0, le=MAX_INT, description="The sample's global index in the run.")
    position: int | None = Field(
        default=None, ge=0, le=MAX_INT, description="The sample's position in the rank's batch (the #sample-{position} anchor)."
    )


def _store(catalog: Catalog, store: FlagStore, flag: FlagIn) -> tuple[Flag, object]:
    """Check the sample exists (and the version resolves to its full id), then store the flag."""
    check_name("dataset", flag.dataset)
    if flag.run is not None:
        check_name("run", flag.run)
    version = catalog.resolve(f"{flag.dataset}@{flag.version}")
    version.find(flag.key)
    if flag.position is None and flag.index is not None:
        flag.position = _position_of(catalog, flag)
    stored = store.add(
        dataset=version.name,
        version=version.id,
        key=flag.key,
        note=flag.note,
        tags=flag.tags,
        run=flag.run,
        step=flag.step,
        rank=flag.rank,
        index=flag.index,
        position=flag.position,
    )
    return stored, version


class FlagEdit(BaseModel):
    """A flag's new note and/or tags (a field left out is kept)."""

    note: str | None = Field(default=None, max_length=10_000)
    tags: list[str] | str | None = None


def _position_of(catalog: Catalog, flag: FlagIn) -> int | None:
    """The position of the flag's global ``index`` in the batch its run read at (step, rank), when that batch holds it.

    Clients that send only the global index still get a link to the sample's anchor on the step/rank page.
    """
    if flag.run is None or flag.step is None or flag.rank is None:
        return None
    try:
        indices = catalog.run(flag.run).batch(flag.step, flag.rank).indices
    except BatchscopeError:
        return None
    return indices.index(flag.index) if flag.index in indices else None


@page(router, "/flags", summary="Flags, newest first, filterable by dataset and tag", model=FlagsPage)
def flags_list(
    request: Request,
    store: FlagsDep,
    catalog: CatalogDep,
    runs: RunsDep,
    dataset: Name = None,
    tag: Tag = None,
    before: Annotated[int | None, Query(ge=0, le=MAX_INT, description="Flag id cursor: flags older than this.")] = None,
) -> Response:
    data = flags_page(
        store, dataset=dataset or None, tag=tag or None, before=before, catalog=catalog, open_run=lambda run: runs.run(catalog, run)
    )
    return respond(request, data, template="flags.html", block="flags")


@router.get(
    "/flags.jsonl",
    summary="Flags as JSON lines",
    tags=["flags"],
    **bytes_answer("application/x-ndjson", description="One flag per line, as GET /api/flags/{flag_id} gives it"),
)
def flags_jsonl(store: FlagsDep, dataset: Name = None, tag: Tag = None) -> Response:
    flags = store.iter_all(FlagFilter(dataset=dataset or None, tag=tag or None))
    # The first page is read before answering: a database that cannot be read (a full disk) is a 503, not a 200 cut off.
    first = list(itertools.islice(flags, 1))

    def lines() -> Iterator[bytes]:
        for flag in itertools.chain(first, flags):
            yield (json.dumps(jsonable(flag), ensure_ascii=False) + "\n").encode()

    return StreamingResponse(lines(), media_type="application/x-ndjson; charset=utf-8")


@router.get(
    "/flags/keys.txt",
    summary="Flagged keys, one a line, for `batchscope register --exclude`",
    tags=["flags"],
    **bytes_answer("text/plain", description="A key file: one key a line (JSON strings for keys that need quoting)"),
)
def flags_keys(
    store: FlagsDep,
    dataset: Name = None,
    tag: Tag = None,
    version: Annotated[str | None, Query(max_length=64, description="Only flags of this version id.")] = None,
) -> Response:
    keys = store.keys(FlagFilter(dataset=dataset or None, tag=tag or None, version=version or None))
    return Response(write_key_file(keys), media_type="text/plain; charset=utf-8")


@page(router, "/flags/{flag_id}", summary="One flag", model=FlagPage)
def flag(
    request: Request, flag_id: Annotated[int, Path(ge=0, le=MAX_INT)], store: FlagsDep, catalog: CatalogDep, runs: RunsDep
) -> Response:
    data = flag_page(store, flag_id, catalog=catalog, open_run=lambda run: runs.run(catalog, run))
    return respond(request, data, template="flag.html")


@router.post("/flags", include_in_schema=False, response_class=HTMLResponse)
def flag_from_form(
    request: Request,
    catalog: CatalogDep,
    store: FlagsDep,
    dataset: Annotated[str, Form(max_length=128)],
    version: Annotated[str, Form(max_length=64)],
    key: Annotated[str, Form(max_length=100_000)],
    note: Annotated[str, Form(max_length=10_000)] = "",
    tags: Annotated[str, Form(max_length=2_000)] = "",
    run: Annotated[str | None, Form(max_length=128)] = None,
    step: Annotated[int | None, Form(ge=0, le=MAX_INT)] = None,
    rank: Annotated[int | None, Form(ge=0, le=MAX_INT)] = None,
    index: Annotated[int | None, Form(ge=0, le=MAX_INT)] = None,
    position: Annotated[int | None, Form(ge=0, le=MAX_INT)] = None,
) -> Response:
    """Flag a sample from its page: htmx swaps in the updated form (with the error, if any), a plain POST redirects to the flag."""
    context = {"run": run, "step": step, "rank": rank, "index": index, "position": position}
    try:
        stored, version_ = _store(catalog, store, FlagIn(dataset=dataset, version=version, key=key, note=note, tags=tags, **context))
    except BatchscopeError as exc:
        if not wants_fragment(request):
            raise
        form = FlagForm(action=urls.flags(), dataset=dataset, version=version, key=key, error=exc.message, **context)
        return _form_response(request, form, exc.status)
    if not wants_fragment(request):
        return RedirectResponse(stored.url, status_code=303, headers=VARY)
    form = flag_form(store, version_, key, **context)
    form.message = f"flagged as #{stored.id}"
    return _form_response(request, form, 200)


def _form_response(request: Request, form: FlagForm, status: int) -> HTMLResponse:
    html = request.app.state.templates.render("_partials/_flag_form.html", {"form": form, "request": request})
    return HTMLResponse(html, status_code=status, headers=VARY)


@router.post(
    "/api/flags",
    status_code=201,
    summary="Flag a sample",
    tags=["flags"],
    responses={201: {"model": response_model(Flag), "description": "The stored flag; Location is its page"}},
)
def flag_from_json(flag: FlagIn, catalog: CatalogDep, store: FlagsDep) -> JSONResponse:
    stored, _ = _store(catalog, store, flag)
    return JSONResponse(jsonable(stored), status_code=201, headers={**VARY, "Location": stored.url})


FlagId = Annotated[int, Path(ge=0, le=MAX_INT, description="The flag's id.")]
FLAG_ANSWER = {200: {"model": response_model(Flag), "description": "The flag, as it is now (or was, when deleted)"}}


@router.patch("/api/flags/{flag_id}", summary="Edit a flag's note and tags", tags=["flags"], responses=FLAG_ANSWER)
def edit_flag(flag_id: FlagId, edit: FlagEdit, store: FlagsDep) -> JSONResponse:
    flag = store.update(flag_id, note=edit.note, tags=edit.tags)
    return JSONResponse(jsonable(flag), headers=VARY)


@router.delete("/api/flags/{flag_id}", summary="Delete a flag", tags=["flags"], responses=FLAG_ANSWER)
def delete_flag(flag_id: FlagId, store: FlagsDep) -> JSONResponse:
    return JSONResponse(jsonable(store.delete(flag_id)), headers=VARY)


@router.post("/flags/{flag_id}/edit", include_in_schema=False, response_class=HTMLResponse)
def edit_flag_from_form(
    request: Request,
    flag_id: FlagId,
    store: FlagsDep,
    note: Annotated[str, Form(max_length=10_000)] = "",
    tags: Annotated[str, Form(max_length=2_000)] = "",
) -> Response:
    """The flag page's edit form: htmx swaps in the flag's panel (with the error, if any), a plain POST redirects to it."""
    try:
        flag = store.update(flag_id, note=note, tags=tags)
    except BatchscopeError as exc:
        if not wants_fragment(request) or isinstance(exc, FlagNotFound):
            raise
        return respond(request, flag_view(store.get(flag_id), error=exc.message), template="flag.html", block="flag", status=exc.status)
    if not wants_fragment(request):
        return RedirectResponse(flag.url, status_code=303, headers=VARY)
    return respond(request, flag_view(flag, message="saved"), template="flag.html", block="flag")


@router.post("/flags/{flag_id}/delete", include_in_schema=False, response_class=HTMLResponse)
def delete_flag_from_form(request: Request, flag_id: FlagId, store: FlagsDep) -> Response:
    """The flag page's delete form: back to the flag list (htmx is told to go there)."""
    store.delete(flag_id)
    if wants_fragment(request):
        return HTMLResponse("", headers={**VARY, "HX-Redirect": urls.flags()})
    return RedirectResponse(urls.flags(), status_code=303, headers=VARY)
