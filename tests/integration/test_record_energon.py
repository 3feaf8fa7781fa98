"""Recording Megatron-Energon loaders of 2 ranks (Energon's own WorkerConfig rank/world size, a shuffle buffer): every
sample is kept with Energon's key, each batch's restore key is noted, and a page rebuilds the batch with Energon's
restore_sample where the dataset is available — and says so where it is not."""

from __future__ import annotations

import io
import os
import shutil
import subprocess
import sys
import tarfile
import warnings

import batchscope  # noqa: F401  (the public package, as users import it)
from loaders import Catalog
from loaders.record.energon import record_energon
from loaders.record.recorder import RecordOptions


def _prepare(path) -> None:
    """A tiny WebDataset of text samples in 2 tar shards, prepared by Energon's own CLI."""
    path.mkdir()
    for shard in range(2):
        with tarfile.open(path / f"part-{shard}.tar", "w") as tar:
            for i in range(shard * 12, shard * 12 + 12):
                data = f"document {i} says {'hello ' * (i % 4)}".encode()
                info = tarfile.TarInfo(f"doc-{i:03d}.txt")
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    command = [sys.executable, "-m", "megatron.energon.cli.main", "prepare", str(path), "--non-interactive", "--split-ratio", "1,0,0"]
    command += ["--sample-type", "TextSample", "--field-map", '{"text": "txt"}']
    done = subprocess.run(command, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr


def test_energon_batches_are_recorded_and_rebuilt_with_restore_sample(tmp_path):
    from megatron.energon import WorkerConfig, get_savable_loader, get_train_dataset

    dataset = tmp_path / "energon-text"
    _prepare(dataset)
    catalog = Catalog(tmp_path / "catalog")
    yielded = {}
    settings = {"batch_size": 3, "shuffle_buffer_size": 4, "max_samples_per_sequence": 2}
    for rank in range(2):
        config = WorkerConfig(rank=rank, world_size=2, num_workers=0)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            loader = get_savable_loader(get_train_dataset(str(dataset), worker_config=config, **settings))
        rec = record_energon(
            loader,
            path=dataset,
            **settings,
            run="energon",
            root=catalog.root,
            rank=rank,
            world_size=2,
            options=RecordOptions(flush_seconds=0),
        )
        yielded[rank] = []
        for batch in rec:
            yielded[rank].append((list(batch.__key__), list(batch.text)))
            if len(yielded[rank]) == 3:
                break
        rec.close()
    run = catalog.run("energon")
    assert run.hook == "energon" and run.known_steps == 3
    assert {k for r in yielded for keys, _ in yielded[r] for k in keys} <= {f"doc-{i:03d}" for i in range(24)}
    for rank in range(2):
        for step, (keys, texts) in enumerate(yielded[rank]):
            batch = run.batch(step, rank)
            assert [s.record["energon_key"] for s in batch.samples] == keys
            assert [s.record["text"] for s in batch.samples] == texts
            check = run.compare(batch)
            assert check.status == "recorded" and check.reasons == ["rebuilt with Energon's restore_sample: the same 3 samples"]
    shutil.move(dataset, tmp_path / "moved-away")
    elsewhere = catalog.run("energon")
    check = elsewhere.compare(elsewhere.batch(1, 0))
    assert (
        check.status == "recorded"
        and "not rebuilt with Energon's restore_sample" in check.reasons[0]
        and "not available" in check.reasons[0]
    )
    assert os.path.isdir(tmp_path / "moved-away")
