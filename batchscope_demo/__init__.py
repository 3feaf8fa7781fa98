"""The demo workspace: every dataset kind in two versions, plus runs made by real (tiny) training."""

from __future__ import annotations

import importlib
import json
import shutil
import time
from pathlib import Path
from typing import Callable

from loaders import Catalog

#: Builders in dependency order (web-text trains the tokenizer the others use).
DATASETS = ("text", "chat", "rollouts", "images", "videos", "episodes", "audio")
FORMAT = 5  # 4: the pretraining run logs per-token losses; 5: sounds, demo-episodes, per-rollout losses


def build_demo(root: str, *, seed: int = 0, log: Callable[[str], None] = print) -> Catalog:
    """Build every demo dataset and run into ``root`` (which should be empty)."""
    catalog = Catalog(root)
    for module_name in DATASETS:
        started = time.monotonic()
        module = importlib.import_module(f"{__name__}.{module_name}")
        module.build(catalog, seed=seed)
        log(f"  built {module_name} datasets in {time.monotonic() - started:.1f}s")
    from .runs import train_episodes, train_multimodal, train_pretrain, train_rl

    for train in (train_pretrain, train_multimodal, train_rl, train_episodes):
        started = time.monotonic()
        train(catalog, seed, log)
        log(f"  trained in {time.monotonic() - started:.1f}s")
    return catalog


def ensure_demo(root: str, *, seed: int = 0, rebuild: bool = False, log: Callable[[str], None] = print) -> Catalog:
    """Build the demo workspace once; later calls reuse it (``rebuild`` starts over)."""
    path = Path(root)
    marker = path / "demo.json"
    expected = {"format": FORMAT, "seed": seed}
    if marker.exists() and not rebuild and json.loads(marker.read_text()) == expected:
        log(f"demo workspace ready at {path}")
        return Catalog(root)
    if path.exists():
        shutil.rmtree(path)
    log(f"building the demo workspace at {path} (seed {seed})...")
    started = time.monotonic()
    catalog = build_demo(root, seed=seed, log=log)
    marker.write_text(json.dumps(expected))
    log(f"demo workspace built in {time.monotonic() - started:.0f}s")
    return catalog
