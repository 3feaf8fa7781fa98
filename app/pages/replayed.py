"""Page data of what only a replayed run has: the framework that read it, its settings, its pinned files."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from .. import urls
from ..jsonable import html_only


@dataclass
class ReplayedDocuments:
    """One set of a replayed run's stored documents: the catalog version its files are, read in place."""

    ref: str
    dataset: str
    version: str
    rows: int
    shard_format: str
    files: list[str]
    version_url: str = html_only("")


@dataclass
class PinnedFile:
    """A file besides the documents that the replay reads, as pinned when the run was attached."""

    path: str
    role: str
    size: int
    sha256: str


@dataclass
class ReplayPanel:
    """How a replayed run read: the framework, in its own words, and every file it reads, pinned."""

    framework: str
    title: str
    lines: list[tuple[str, str]]
    settings: dict[str, Any]
    documents: list[ReplayedDocuments]
    pinned: list[PinnedFile]
    framework_versions: dict[str, str]
    logged_batches: int
    metrics_files: list[str] = field(default_factory=list)


def replay_panel(run: Any) -> ReplayPanel:
    """The replay panel of a replayed run's page (opening the replay checks every pinned file)."""
    documents = []
    for source, entry in enumerate(run.sources):
        version = run.version(source)
        documents.append(
            ReplayedDocuments(
                entry.ref,
                entry.dataset,
                entry.version,
                entry.rows,
                entry.shard_format,
                [s.uri for s in version.shards],
                urls.version(entry.dataset, entry.version),
            )
        )
    manifest = run.manifest
    return ReplayPanel(
        framework=run.framework_name,
        title=run.framework.title,
        lines=run.describe(),
        settings=run.settings,
        documents=documents,
        pinned=[PinnedFile(p.path, p.role, p.size, p.sha256) for p in run.pins],
        framework_versions=dict(manifest.get("framework_versions", {})),
        logged_batches=len(run.logged),
        metrics_files=list(manifest.get("imports", {}).get("metrics", [])),
    )
