"""The home page's data: runs, datasets with their latest version, and recent flags."""

from __future__ import annotations

from dataclasses import dataclass

from loaders import Catalog
from loaders.errors import BatchscopeError, StorageError

from .. import urls
from ..flags import Flag, FlagStore
from ..jsonable import html_only
from .common import Link

RECENT_FLAGS = 10


@dataclass
class RunSummary:
    name: str
    url: str


@dataclass
class DatasetSummary:
    """One dataset as listed: its latest version and tags."""

    name: str
    url: str
    latest: str | None
    latest_url: str | None
    rows: int | None
    shards: int | None
    bytes: int | None
    versions: int
    tags: dict[str, str]
    error: str | None = None


@dataclass
class HomePage:
    runs: list[RunSummary]
    datasets: list[DatasetSummary]
    flags: list[Flag]
    flags_url: str
    flags_error: str = ""
    title: str = html_only("batchscope")
    crumbs: list[Link] = html_only(default_factory=list)


def dataset_summary(catalog: Catalog, name: str) -> DatasetSummary:
    """A dataset's latest version, rows and tags; a broken dataset is listed with its error, not dropped."""
    try:
        versions = catalog.versions(name)
        tags = catalog.tags(name)
        latest_id = tags.get("latest") or (versions[-1].id if versions else None)
        latest = next((v for v in versions if v.id == latest_id), None)
    except BatchscopeError as exc:
        return DatasetSummary(name, urls.dataset(name), None, None, None, None, None, 0, {}, error=exc.message)
    return DatasetSummary(
        name=name,
        url=urls.dataset(name),
        latest=latest.id if latest else None,
        latest_url=urls.version(name, latest) if latest else None,
        rows=latest.rows if latest else None,
        shards=len(latest.shards) if latest else None,
        bytes=latest.manifest.size if latest else None,
        versions=len(versions),
        tags=tags,
    )


def home_page(catalog: Catalog, flags: FlagStore) -> HomePage:
    """Everything the home page shows."""
    runs = [RunSummary(name, urls.run(name)) for name in catalog.runs()]
    datasets = [dataset_summary(catalog, name) for name in catalog.datasets()]
    try:
        recent, error = flags.list(limit=RECENT_FLAGS), ""
    except StorageError as exc:
        recent, error = [], exc.message
    return HomePage(runs=runs, datasets=datasets, flags=recent, flags_url=urls.flags(), flags_error=error)
