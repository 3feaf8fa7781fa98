"""Run manifests: a read plan resolved against the catalog (tags → version ids, order numbers), written once.

Resolving reads what the order needs from the data itself — every source's token counts (lossless packing) or an
estimate of sequences per packing block — through the run's parts (sampler, document source, packer), never
through a :class:`loaders.run.Run`, which is made from the manifest afterwards.

>>> manifest = create_manifest(catalog, "r", plan)        # doctest: +SKIP
>>> manifest["resolved"]["sources"][0]["version"][:8]     # doctest: +SKIP
'3f9c2a71'
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import math
import statistics
from typing import Any, Callable

import numpy as np

from .. import storage
from ..catalog.files import read_json
from ..catalog.store import CatalogStore, check_name
from ..catalog.version import DatasetVersion
from ..errors import CatalogCorrupt, InvalidPlan, RunNotFound
from ..order.mixture import MAX_CYCLE_POSITIONS, MAX_CYCLE_STEPS, apportion, cycle_fits, exact_cycle
from ..order.step_mixture import StepMixture
from ..sampling import token_index
from ..sampling.concat_packing import ConcatPacking
from ..sampling.documents import DocumentSource
from ..sampling.packer import estimate_sequences_per_block
from ..sampling.plan import ReadPlan, ResolvedSource, packs_losslessly
from ..sampling.sampler import Sampler

__all__ = [
    "READ_FORMAT",
    "ResolvedSource",
    "create_manifest",
    "cycle_steps",
    "fingerprint",
    "load_manifest",
    "manifest_path",
    "read_format",
    "resolve_against",
    "run_dir",
    "run_names",
    "source_chunk",
    "stored_plan_json",
    "token_count_key",
]


#: How a run's plan turns into samples. A run keeps the format it was created with, so upgrading batchscope
#: never changes what an existing run's (step, rank) means. 1: unstaggered shuffle windows, full-size crops
#: (plans stored before RandomResizedCrop had ``reduced_decode``); 2: staggered windows, options as stored;
#: 3: every step carries the mixture weights (loaders.order.step_mixture), chunk-aligned stream parts
#: (loaders.order.lane_order), lossless concat-and-chunk packing by default with position ids below seq_len;
#: 4: format 3 with the weights held exactly (the mixture cycle is the fewest steps in which every share is a whole
#: number of samples, loaders.order.mixture.exact_cycle) and, for lossless packing over epochs, every stream of a
#: source stopping at its own epoch boundary (its later sequences are padding) instead of starting the next epoch.
READ_FORMAT = 4
#: Transform options a format implies where its stored plans omit them (they predate the option).
_IMPLIED_OPTIONS: dict[int, dict[str, dict[str, Any]]] = {
    1: {"random_resized_crop": {"reduced_decode": False}, "pack": {"strategy": "block", "position_ids": "document"}},
    2: {"pack": {"strategy": "block", "position_ids": "document"}},
}


def _with_transforms(plan: dict[str, Any], change: Callable[[dict[str, Any]], dict[str, Any] | None]) -> dict[str, Any] | None:
    """``plan`` JSON with ``change`` applied to every transform (its own and its sources'); None if any gives None."""

    def each(transforms: list[dict[str, Any]]) -> list[dict[str, Any]] | None:
        changed = [change(t) for t in transforms]
        return None if any(t is None for t in changed) else changed  # type: ignore[return-value]

    own = each(plan.get("transforms", []))
    sources = [each(source.get("transforms", [])) for source in plan.get("sources", [])]
    if own is None or any(t is None for t in sources):
        return None
    return {**plan, "transforms": own, "sources": [{**src, "transforms": t} for src, t in zip(plan.get("sources", []), sources)]}


def _plan_in_format(plan: dict[str, Any], fmt: int) -> dict[str, Any] | None:
    """The plan JSON as read format ``fmt`` stored it, or None when the plan asks for what that format cannot mean."""
    options = _IMPLIED_OPTIONS.get(fmt, {})

    def strip(transform: dict[str, Any]) -> dict[str, Any] | None:
        implied = options.get(transform.get("type"), {})
        if any(transform.get(k, v) != v for k, v in implied.items()):
            return None
        return {k: v for k, v in transform.items() if k not in implied}

    return _with_transforms(plan, strip)


def read_format(manifest: dict[str, Any]) -> int:
    """The read format a run manifest was created with (1 when it predates the field)."""
    return int(manifest["resolved"].get("read_format", 1))


def stored_plan_json(manifest: dict[str, Any]) -> dict[str, Any]:
    """The manifest's plan JSON with the options its read format implies where the stored JSON omits them."""
    plan = manifest["plan"]
    options = _IMPLIED_OPTIONS.get(read_format(manifest), {})
    if not options:
        return plan
    upgraded = _with_transforms(plan, lambda t: {**options.get(t.get("type"), {}), **t})
    assert upgraded is not None
    return upgraded


#: Resolved entries that only speed lookups up (they change no sample): left out of the fingerprint, so runs created
#: before they existed still reopen as identical.
LOOKUP_ONLY = ("record_token_counts",)


def fingerprint(plan: dict[str, Any], resolved: dict[str, Any]) -> str:
    """What a reader state is checked against: a hash of the plan and everything resolved from it."""
    meaning = {k: v for k, v in resolved.items() if k not in LOOKUP_ONLY}
    return hashlib.sha256(json.dumps({"plan": plan, "resolved": meaning}, sort_keys=True).encode()).hexdigest()[:32]


def now() -> str:
    """UTC time for manifests and logs."""
    return _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds")


def median_row_group(version: DatasetVersion) -> int:
    sizes = [n for shard in version.shards for n in shard.row_groups if n > 0]
    return int(statistics.median(sizes)) if sizes else 1


def run_dir(catalog: CatalogStore, name: str) -> str:
    """Where run ``name`` keeps its manifest, world-size log and ledger."""
    return catalog.path("runs", check_name("run", name))


def run_names(catalog: CatalogStore) -> list[str]:
    """Names of all runs in ``catalog``, sorted."""
    return [n for n in storage.list_names(catalog.path("runs")) if storage.stat(catalog.path("runs", n, "run.json")).exists]


def manifest_path(catalog: CatalogStore, name: str) -> str:
    """Where run ``name``'s manifest is written."""
    return storage.join(run_dir(catalog, name), "run.json")


def load_manifest(catalog: CatalogStore, name: str) -> dict[str, Any]:
    """The manifest of run ``name`` (``RunNotFound``, naming the runs there are, when it does not exist;
    ``CatalogCorrupt`` when it is not JSON)."""
    path = manifest_path(catalog, name)
    try:  # read first: a fresh process opening a run pays no separate stat (see bench lookup)
        return read_json(path, "run manifest")
    except CatalogCorrupt:
        raise
    except Exception:  # a missing file, as each store says it: RunNotFound when it is not there, else what happened
        if storage.stat(path).exists:
            raise
    runs = ", ".join(run_names(catalog)) or "none"
    raise RunNotFound(f"no run named {name!r} in catalog {catalog.root} (runs: {runs})")


def create_manifest(
    catalog: CatalogStore, name: str, plan: ReadPlan, *, exist_ok: bool = False, as_format: int | None = None
) -> dict[str, Any]:
    """Resolve ``plan`` against ``catalog`` and write run ``name``'s manifest; returns the manifest to read it by.

    An existing run of that name is refused, unless ``exist_ok`` and its plan and resolved versions are the same:
    then its own manifest is returned, in the read format it was created with. ``as_format`` creates a run of an
    older read format (3 or 4; default :data:`READ_FORMAT`), as an earlier batchscope would have (tests and
    benchmarks compare formats with it).
    """
    path = manifest_path(catalog, name)
    old = read_json(path, "run manifest") if storage.stat(path).exists else None
    if as_format is not None and as_format not in (3, READ_FORMAT):
        raise InvalidPlan(f"as_format={as_format} is out of range: runs can be created in read format 3 or {READ_FORMAT}")
    # Reopening an existing run resolves the plan in the read format that run was created with.
    fmt = read_format(old) if old is not None else (as_format or READ_FORMAT)
    plan_json = _plan_in_format(plan.to_json(), fmt)
    versions = [catalog.resolve(s.ref) for s in plan.sources]
    weights = [float(s.weight) if s.weight is not None else float(v.rows) for s, v in zip(plan.sources, versions)]
    for source, version in zip(plan.sources, versions):
        if version.rows == 0:
            raise InvalidPlan(f"source {source.ref} resolves to {version.ref}, which has no rows")
    sources = [
        ResolvedSource(source.ref, version.name, version.id, version.rows, weight, source_chunk(plan, version, fmt))
        for source, version, weight in zip(plan.sources, versions, weights)
    ]
    cycle, counts, exact = mixture_counts(plan, weights, fmt)
    tokenizers: dict[str, str] = {}
    all_transforms = list(plan.transforms) + [t for s in plan.sources for t in s.transforms]
    for t in all_transforms:
        for tok in t.tokenizer_names():
            tokenizers[tok] = catalog.tokenizer_id(tok)
    for version in versions:
        if version.tokenizer:
            tokenizers.setdefault(version.tokenizer, catalog.tokenizer_id(version.tokenizer))
    resolved: dict[str, Any] = {
        "sources": [s.to_json() for s in sources],
        "counts": counts,
        "tokenizers": tokenizers,
        "sequences_per_block": None,
        "total_steps": plan.steps,
    }
    if fmt >= 2:
        resolved["read_format"] = fmt
    if fmt >= 3:
        resolved["cycle_steps"] = cycle
    if fmt >= 4:
        resolved["mixture_exact"] = exact
    lossless = packs_losslessly(plan, fmt)
    if lossless:
        resolved["token_counts"] = [{"key": token_count_key(plan, i, s, tokenizers), "sha256": None} for i, s in enumerate(sources)]
    manifest = {"format": "batchscope.run/1", "name": name, "created": now(), "plan": plan_json or plan.to_json(), "resolved": resolved}
    stored = ReadPlan.from_json(stored_plan_json(manifest))  # the plan as the run will read it
    documents = DocumentSource(catalog, name, stored, sources, tokenizers)
    sampler = Sampler(stored, sources, counts, read_format=fmt, cycle_steps=resolved.get("cycle_steps"))
    if lossless:
        token_counts = _record_token_counts(documents, resolved)
    elif plan.pack is not None:
        resolved["sequences_per_block"] = plan.pack.sequences_per_block or estimate_sequences_per_block(sampler, documents)
    if plan.epochs is not None:
        if lossless and fmt >= 4:
            assert sampler.step_mixture is not None
            _check_epoch_boundaries(plan, sampler)
            concat = ConcatPacking(documents, sampler.lane_orders, token_counts, epochs=plan.epochs)
            resolved["total_steps"] = _steps_until_every_lane_stopped(concat, sampler.step_mixture)
        elif lossless:
            assert sampler.step_mixture is not None
            concat = ConcatPacking(documents, sampler.lane_orders, token_counts)
            resolved["total_steps"] = _steps_for_packed_epochs(concat, sampler.step_mixture, plan.epochs)
        else:
            block = cycle * plan.global_batch_size if fmt >= 3 else plan.mixture_block
            docs_per_sample = 1.0
            if plan.pack is not None:
                docs_per_sample = plan.pack.docs_per_block / resolved["sequences_per_block"]
            need = max(s.rows / docs_per_sample * block / c for s, c in zip(sources, counts))
            resolved["total_steps"] = max(1, math.ceil(plan.epochs * need / plan.global_batch_size))
    manifest["fingerprint"] = fingerprint(manifest["plan"], resolved)
    if old is not None:
        same = plan_json is not None and old.get("fingerprint") == manifest["fingerprint"]
        if same and exist_ok:
            return old  # an identical run, in the read format it was created with
        raise InvalidPlan(
            f"run {name!r} already exists in {catalog.root}"
            + ("" if same else " with a different plan or different resolved versions")
            + "; pick another name"
            + ("" if exist_ok else " or pass exist_ok=True to reopen an identical run")
        )
    storage.write_bytes_atomic(path, json.dumps(manifest, indent=1).encode())
    return manifest


def cycle_steps(plan: ReadPlan) -> int:
    """Steps per mixture cycle (read format 3): the fewest whose positions reach ``mixture_block``."""
    return -(-plan.mixture_block // plan.global_batch_size)


def mixture_counts(plan: ReadPlan, weights: list[float], fmt: int) -> tuple[int, list[int], bool]:
    """``(cycle steps, counts per cycle, exact)`` of a plan's mixture in read format ``fmt``.

    Formats 1–3 apportion the weights over ``mixture_block`` positions (rounded to about 1/mixture_block). Format 4
    holds them exactly over the fewest steps that make every share whole (:func:`loaders.order.mixture.exact_cycle`);
    weights a plan gives that would need a longer cycle than :data:`MAX_CYCLE_STEPS` steps and
    :data:`MAX_CYCLE_POSITIONS` positions are refused, while weights made from row counts (a plan without weights)
    are then apportioned as in format 3 and the run says so (``exact`` is False).
    """
    batch = plan.global_batch_size
    if fmt < 3:
        return 1, apportion(weights, plan.mixture_block), False
    if fmt == 3:
        cycle = cycle_steps(plan)
        return cycle, apportion(weights, cycle * batch), False
    cycle, counts = exact_cycle(weights, batch)
    if cycle_fits(cycle, batch):
        return cycle, counts, True
    if any(s.weight is not None for s in plan.sources):
        raise InvalidPlan(
            f"source weights {[s.weight for s in plan.sources]} cannot be held exactly: with global_batch_size={batch} "
            f"every share is a whole number of samples only over {cycle} steps ({cycle * batch} positions; at most "
            f"{MAX_CYCLE_STEPS} steps and {MAX_CYCLE_POSITIONS} positions): give weights with fewer decimals or as "
            "small integer ratios"
        )
    cycle = cycle_steps(plan)
    return cycle, apportion(weights, cycle * batch), False


#: Lossless packing splits each epoch among streams in whole chunks: at least this many chunks per stream.
CHUNKS_PER_STREAM = 8


def source_chunk(plan: ReadPlan, version: DatasetVersion, fmt: int) -> int:
    """Records per shuffle chunk of a source (lossless packing: small enough that every stream gets whole chunks)."""
    chunk = plan.shuffle.chunk_size or median_row_group(version) * plan.shuffle.chunk_row_groups
    if fmt >= 3 and plan.pack is not None and plan.pack.strategy == "concat":
        assert plan.streams is not None  # >= 8 whole chunks per stream, so parts differ by at most 1/8
        chunk = min(chunk, version.rows // (CHUNKS_PER_STREAM * plan.streams))
    return max(1, min(chunk, version.rows))


def token_count_key(plan: ReadPlan, index: int, source: ResolvedSource, tokenizers: dict[str, str]) -> str:
    """The content key of a source's token counts: its version, chunking, document transforms and tokenizers."""
    transforms = [t.to_json() for t in (*plan.sources[index].transforms, *plan.document_transforms)]
    return token_index.index_key(source.version, source.rows, source.chunk, transforms, tokenizers, plan.seed)


def _record_token_counts(documents: DocumentSource, resolved: dict[str, Any]) -> list[np.ndarray]:
    """Build (or find) every source's token counts, per record and per chunk, and pin their digests in the manifest
    being created (a stored chunk file that disagrees with the records' sums is rebuilt); returns the chunk counts."""
    resolved["record_token_counts"] = []
    chunk_counts = []
    for i, entry in enumerate(resolved["token_counts"]):
        records_path = documents.catalog.path("token-counts", token_index.records_path(entry["key"]))
        records, records_sha = token_index.load_or_build(records_path, None, lambda i=i: documents.count_record_tokens(i))
        sums = token_index.chunk_sums(records, documents.sources[i].chunk)
        path = documents.catalog.path("token-counts", f"{entry['key']}.npy")
        counts, entry["sha256"] = token_index.load_or_build(path, token_index.digest(sums), lambda sums=sums: sums)
        resolved["record_token_counts"].append({"key": entry["key"], "sha256": records_sha})
        if not counts.sum():
            raise InvalidPlan(f"source {documents.sources[i].ref} makes no tokens: nothing to pack")
        chunk_counts.append(counts)
    return chunk_counts


def _steps_for_packed_epochs(concat: ConcatPacking, mixture: StepMixture, epochs: float) -> int:
    """Steps until every stream has read ``epochs`` epochs of packed sequences of the source it finishes last."""
    steps = 1
    for (stream, source), packer in concat.packers.items():
        whole, fraction = divmod(epochs, 1)
        count = sum(packer.layout(layout).sequences for layout in range(int(whole)))
        count += math.ceil(fraction * packer.layout(int(whole)).sequences)
        steps = max(steps, mixture.steps_to_draw(stream, source, count))
    return steps


def _check_epoch_boundaries(plan: ReadPlan, sampler: Sampler) -> None:
    """Refuse epochs a stream cannot stop at: a source with fewer chunks than the streams drawing from it lays out
    ``repeats`` epochs together, and its streams can only stop after a whole number of such layouts."""
    epochs = plan.epochs
    assert epochs is not None
    for source, order in zip(plan.sources, sampler.lane_orders):
        if order.repeats > 1 and (epochs % order.repeats or epochs != int(epochs)):
            raise InvalidPlan(
                f"epochs={epochs} cannot stop every stream at an epoch boundary: source {source.ref} has {order.slots} "
                f"chunk(s) for {sum(1 for r in order.rates if r)} drawing streams, so its epochs are laid out "
                f"{order.repeats} at a time; use a multiple of {order.repeats} epochs, fewer streams, or steps="
            )


def _steps_until_every_lane_stopped(concat: ConcatPacking, mixture: StepMixture) -> int:
    """Steps until every stream has read its sequences of the plan's epochs of every source (read format 4)."""
    steps = 1
    for (stream, source), packer in concat.packers.items():
        assert packer.limit is not None
        steps = max(steps, mixture.steps_to_draw(stream, source, packer.limit))
    return steps


def resolve_against(catalog: CatalogStore, manifest: dict[str, Any], other: str) -> dict[str, Any]:
    """A run's ``manifest`` re-resolved with sources swapped to ``other`` — ``name@version-or-tag``, or another run
    whose versions to take (see :meth:`loaders.run.Run.against`); not written."""
    name, plan, fmt = manifest["name"], ReadPlan.from_json(stored_plan_json(manifest)), read_format(manifest)
    old = manifest["resolved"]
    current = [ResolvedSource(**s) for s in old["sources"]]
    swaps: dict[str, str] = {}
    if "@" in other:
        version = catalog.resolve(other)
        swaps[version.name] = version.id
    else:
        swaps = {s["dataset"]: s["version"] for s in load_manifest(catalog, other)["resolved"]["sources"]}
    if not any(s.dataset in swaps for s in current):
        datasets = ", ".join(s.dataset for s in current)
        raise InvalidPlan(f"{other!r} names no dataset of run {name} (its sources read: {datasets})")
    sources = []
    for source, plan_source in zip(current, plan.sources):
        if source.dataset not in swaps or swaps[source.dataset] == source.version:
            sources.append(source.to_json())
            continue
        version = catalog.resolve(f"{source.dataset}@{swaps[source.dataset]}")
        weight = source.weight if plan_source.weight is not None else float(version.rows)
        chunk = source_chunk(plan, version, fmt)
        sources.append(ResolvedSource(source.ref, version.name, version.id, version.rows, weight, chunk).to_json())
    cycle, counts, exact = mixture_counts(plan, [s["weight"] for s in sources], fmt)
    resolved = {**old, "sources": sources, "counts": counts}
    if fmt >= 3:
        resolved["cycle_steps"] = cycle
    if fmt >= 4:
        resolved["mixture_exact"] = exact
    if "token_counts" in old:  # a swapped source's counts are built on first use, not pinned
        resolved["token_counts"] = [
            entry
            if source == current[i].to_json()
            else {"key": token_count_key(plan, i, ResolvedSource(**source), old["tokenizers"]), "sha256": None}
            for i, (entry, source) in enumerate(zip(old["token_counts"], sources))
        ]
    if old.get("record_token_counts"):  # a swapped source has none pinned: its sequences are found without them
        resolved["record_token_counts"] = [
            entry if source == current[i].to_json() else None for i, (entry, source) in enumerate(zip(old["record_token_counts"], sources))
        ]
    swapped = {**manifest, "name": f"{name}~{other}", "resolved": resolved}
    swapped["fingerprint"] = fingerprint(swapped["plan"], resolved)
    return swapped
