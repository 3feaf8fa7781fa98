"""The home page's data: runs, datasets with their latest version, and recent flags."""

from __future__ import annotations

from dataclasses import dataclass

from loaders import Catalog, Run
from loaders.errors import BatchscopeError, StorageError
from loaders.run.kinds import claims
from loaders.training.verify_record import NOT_VERIFIED, VerificationState, verification_state

from .. import urls
from ..flags import Flag, FlagStore
from ..jsonable import html_only
from ..run_cache import RunCache
from .common import Link, kind_badge
from .progress import RUNNING_SECONDS, RunProgress, progress

__all__ = ["RECENT_FLAGS", "RUNNING_SECONDS", "DatasetSummary", "HomePage", "RunSummary", "dataset_summary", "home_page", "run_summary"]

RECENT_FLAGS = 10


@dataclass
class RunSummary:
    """One run as the home page lists it: how far its ledger got, its last loss and its status (the run's
    :func:`~app.pages.progress.progress`, which the live marker of its pages shows too).

    ``status`` is ``mismatch`` when the run's last ``batchscope verify`` found records that differ from what the run
    reads and the ledger still holds them; otherwise ``complete`` (the ledger has the last step), ``running`` (written
    to within :data:`RUNNING_SECONDS`), ``stopped`` (neither), ``not started`` (no ledger yet) or ``error`` (see
    ``error``); a replayed run's is ``replayed`` (it read through another framework and wrote no ledger of batches).
    ``steps`` is None for a run whose length is not known yet (a recorded run still training). ``verification`` says
    what the last ``verify`` still proves (:func:`loaders.training.verify_record.verification_state`),
    ``verification_url`` opens its first mismatch.
    """

    name: str
    url: str
    steps: int | None = None
    logged_steps: int = 0
    last_step: int | None = None
    last_step_url: str | None = None
    last_loss: float | None = None
    status: str = "not started"
    error: str | None = None
    kind: str = "native"  # native, replayed or recorded (loaders.run.kinds)
    kind_badge: str | None = html_only(None)
    verification: str = NOT_VERIFIED.status
    verification_label: str = NOT_VERIFIED.label
    verification_url: str | None = None

    @property
    def badge(self) -> str:
        """The badge class of the status."""
        return {"complete": "ok", "running": "warn", "stopped": "warn", "error": "bad", "mismatch": "bad"}.get(self.status, "")


def run_summary(run: Run, *, now: float | None = None, root: str | None = None, measured: RunProgress | None = None) -> RunSummary:
    """A run's progress from its ledger (``measured``: already read by the caller), and its last verification when
    the catalog ``root`` is given (``now`` is the clock, for tests)."""
    p = measured if measured is not None else progress(run, now=now)
    summary = RunSummary(
        run.name,
        urls.run(run.name),
        steps=p.total_steps,
        logged_steps=p.logged_steps,
        last_step=p.last_step,
        last_step_url=p.last_step_url,
        last_loss=p.last_loss,
        status=p.status,
        kind=run.kind,
        kind_badge=kind_badge(run),
    )
    if root is not None:
        state = verification_state(root, run)
        if state == NOT_VERIFIED and run.kind != "native":  # a replayed or recorded run is never called verified
            state = VerificationState(
                "not checked", f"not checked: batchscope verify has not compared it with {claims(run.kind).compared_with}"
            )
        summary.verification, summary.verification_label = state.status, state.label
        summary.verification_url = verification_url(run.name, state)
        if state.status == "mismatch":
            summary.status = "mismatch"
    return summary


def verification_url(run: str, state: VerificationState) -> str | None:
    """The step/rank page of the first (step, rank) the last ``verify`` found mismatched, if any."""
    return urls.rank(run, state.first.step, state.first.rank) if state.first is not None else None


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


def _run_summary(catalog: Catalog, runs: RunCache, name: str) -> RunSummary:
    """A run's summary; a run that cannot be opened (a broken manifest, say) is listed with its error, not dropped."""
    try:
        return run_summary(runs.run(catalog, name), root=catalog.root)
    except BatchscopeError as exc:
        return RunSummary(name, urls.run(name), status="error", error=exc.message)
    except Exception as exc:  # a hand-edited or truncated manifest must not take the home page down
        return RunSummary(name, urls.run(name), status="error", error=f"cannot open run {name}: {type(exc).__name__}: {exc}")


@dataclass
class RunsPage:
    """``/runs``: every run of the catalog, as the home page lists them."""

    runs: list[RunSummary]
    title: str = html_only("runs")
    crumbs: list[Link] = html_only(default_factory=list)


@dataclass
class DatasetsPage:
    """``/datasets``: every dataset of the catalog with its latest version, as the home page lists them."""

    datasets: list[DatasetSummary]
    title: str = html_only("datasets")
    crumbs: list[Link] = html_only(default_factory=list)


def run_summaries(catalog: Catalog, runs: RunCache | None = None) -> list[RunSummary]:
    """Every run's summary, by name."""
    cache = runs if runs is not None else RunCache()
    return [_run_summary(catalog, cache, name) for name in catalog.runs()]


def runs_page(catalog: Catalog, runs: RunCache | None = None) -> RunsPage:
    """Every run with its progress and status."""
    return RunsPage(run_summaries(catalog, runs), crumbs=[Link("home", urls.home()), Link("runs", urls.runs())])


def datasets_page(catalog: Catalog) -> DatasetsPage:
    """Every dataset with its latest version."""
    listed = [dataset_summary(catalog, name) for name in catalog.datasets()]
    return DatasetsPage(listed, crumbs=[Link("home", urls.home()), Link("datasets", urls.datasets())])


def home_page(catalog: Catalog, flags: FlagStore, runs: RunCache | None = None) -> HomePage:
    """Everything the home page shows."""
    listed = run_summaries(catalog, runs)
    datasets = [dataset_summary(catalog, name) for name in catalog.datasets()]
    try:
        recent, error = flags.list(limit=RECENT_FLAGS), ""
    except StorageError as exc:
        recent, error = [], exc.message
    return HomePage(runs=listed, datasets=datasets, flags=recent, flags_url=urls.flags(), flags_error=error)
