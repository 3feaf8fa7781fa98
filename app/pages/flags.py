"""Page data of the flag list (filterable by dataset and tag, cursor-paged) and of one flag."""

from __future__ import annotations

from dataclasses import dataclass

from loaders import Catalog
from loaders.errors import BatchscopeError

from .. import urls
from ..flags import Flag, FlagFilter, FlagStore
from ..jsonable import html_only
from .common import Link
from .where import FlaggedSteps, OpenRun, RunReads, flagged_steps, where_read_panel

PAGE = 100


@dataclass
class Facet:
    """A filter value with its count and the URL that applies it."""

    value: str
    count: int
    url: str
    active: bool


@dataclass
class FlagsPage:
    flags: list[Flag]
    dataset: str | None
    tag: str | None
    total: int
    next_url: str | None
    jsonl_url: str
    keys_url: str
    datasets: list[Facet]
    tags: list[Facet]
    #: Per listed flag the steps that consumed it, and per run the distinct steps flagged samples touched.
    reads: FlaggedSteps | None = None
    all_url: str = html_only("")
    title: str = html_only("flags")
    crumbs: list[Link] = html_only(default_factory=list)


@dataclass
class FlagPage:
    flag: Flag
    #: Where every run read the flagged sample (first epochs; the sample page pages through the rest).
    where: list[RunReads] | None = None
    #: Why the reads could not be listed (the flagged version or key no longer resolves).
    where_error: str = ""
    title: str = html_only("")
    crumbs: list[Link] = html_only(default_factory=list)
    #: What the edit form says after a change ("saved"), or why it was refused.
    message: str = html_only("")
    error: str = html_only("")
    tags_text: str = html_only("")
    edit_url: str = html_only("")
    delete_url: str = html_only("")


def flags_page(
    store: FlagStore,
    *,
    dataset: str | None,
    tag: str | None,
    before: int | None = None,
    limit: int = PAGE,
    catalog: Catalog | None = None,
    open_run: OpenRun | None = None,
) -> FlagsPage:
    """Flags newest first, filtered; facets link to each dataset and tag. Given a catalog and ``open_run``, also
    where each listed flag was read and, per run, how many steps the filtered flags touched."""
    where = FlagFilter(dataset=dataset or None, tag=tag or None)
    flags = store.list(where, limit=limit, before=before)
    reads = None
    if catalog is not None and open_run is not None:
        reads = flagged_steps(catalog, open_run, flags, store.iter_all(where))
    next_url = urls.flags(dataset=dataset, tag=tag, before=flags[-1].id) if len(flags) == limit else None
    datasets = [Facet(name, n, urls.flags(dataset=name, tag=tag), name == dataset) for name, n in store.datasets()]
    tags = [Facet(name, n, urls.flags(dataset=dataset, tag=name), name == tag) for name, n in store.tags(dataset or None)]
    return FlagsPage(
        flags=flags,
        dataset=dataset,
        tag=tag,
        total=store.count(where),
        next_url=next_url,
        jsonl_url=urls.flags_jsonl(dataset=dataset, tag=tag),
        keys_url=urls.flags_keys(dataset=dataset, tag=tag),
        datasets=datasets,
        tags=tags,
        reads=reads,
        all_url=urls.flags(),
        crumbs=[Link("home", urls.home()), Link("flags", urls.flags())],
    )


def flag_page(store: FlagStore, flag_id: int, *, catalog: Catalog | None = None, open_run: OpenRun | None = None) -> FlagPage:
    """One flag; given a catalog and ``open_run``, also where every run read the flagged sample."""
    flag = store.get(flag_id)
    where, error = None, ""
    if catalog is not None and open_run is not None:
        try:
            version = catalog.resolve(f"{flag.dataset}@{flag.version}")
            where = where_read_panel(catalog, open_run, version, flag.key, version.index_of(*version.find(flag.key)))
        except BatchscopeError as exc:
            error = exc.message
    return flag_view(flag, where=where, where_error=error)


def flag_view(flag: Flag, *, where: list[RunReads] | None = None, where_error: str = "", message: str = "", error: str = "") -> FlagPage:
    """A flag's page data with its edit and delete forms (the edit form's fragment needs no where panel)."""
    return FlagPage(
        flag=flag,
        where=where,
        where_error=where_error,
        title=f"flag {flag.id}",
        crumbs=[Link("home", urls.home()), Link("flags", urls.flags()), Link(f"#{flag.id}", flag.url)],
        message=message,
        error=error,
        tags_text=", ".join(flag.tags),
        edit_url=urls.flag_edit(flag.id),
        delete_url=urls.flag_delete(flag.id),
    )
