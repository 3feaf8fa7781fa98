"""The public API is a contract: the names importable from ``loaders`` and ``batchscope`` (and their importers and
PyTorch adapter) are pinned here, and the module paths users may have imported before the read path was split into
sub-packages still give the same modules."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import loaders
from loaders import _moved

ROOT = Path(__file__).resolve().parents[1]

PUBLIC = {
    "loaders": [
        "Address", "AmbiguousKey", "AmbiguousVersion", "Batch", "BatchscopeError", "Catalog", "CatalogCorrupt",
        "ChatTemplate", "ChecksumMismatch", "CorruptData", "DatasetNotFound", "DatasetVersion", "DecodeError",
        "Document", "InvalidName", "InvalidPlan", "InvalidQuery", "KINDS", "Ledger", "LedgerEntry", "MediaChanged",
        "NotFound", "Pack", "RandomResizedCrop", "RankOutOfRange", "ReadPlan", "Reader", "RegistrationError", "Run",
        "RunNotFound", "Sample", "SampleFrames", "SampleNotFound", "Shuffle", "Source", "StateMismatch",
        "StepOutOfRange", "StorageError", "Tokenize", "TokenizerNotFound", "Transform", "UseTokens", "UserFunction",
        "Verification", "VersionNotFound", "WorldSizeSpan", "default_root", "infer_kind", "infer_kinds",
    ],
    "loaders.importers": [
        "Progress", "import_huggingface", "import_images", "import_jsonl", "import_mds", "import_parquet",
        "import_webdataset",
    ],
    "loaders.torch": ["BatchscopeDataset", "Loader", "collate_torch", "make_loader"],
    "loaders.record": ["RecordOptions", "RecordRefused", "RecordWarning", "Recorder", "column", "record", "samples"],
}  # fmt: skip

#: Deep imports documented before the sub-packages, each with a name it must still give.
DEEP = {
    "loaders.adapters.lightning": ["BatchscopeCallback", "BatchscopeDataModule"],
    "loaders.adapters.hf": ["BatchscopeTrainer"],
    "loaders.adapters.inputs": ["causal_lm_inputs"],
    "loaders.storage": ["read_range", "read_bytes", "stat", "join", "write_bytes_atomic"],
    "loaders.catalog": ["CatalogStore", "default_root", "check_name"],
    "loaders.run": ["Run", "Verification", "WorldSizeSpan"],
    "loaders.record.run": ["RecordedRun"],
    "loaders.order": ["SourceOrder"],
    "loaders.where": ["where_read"],
    "loaders.diff": ["diff_versions"],
    "loaders.verification": ["verify_run"],
    "loaders.media": ["render_png"],
}


def test_the_public_names_are_pinned():
    import batchscope
    import batchscope.importers
    import batchscope.torch

    for module, names in PUBLIC.items():
        assert sorted(__import__(module, fromlist=["_"]).__all__) == sorted(names), module
    assert sorted(batchscope.__all__) == sorted([*PUBLIC["loaders"], "importers", "record"])
    assert batchscope.record is loaders.record.record  # batchscope.record(loader, run=..., ...) wraps a loader
    assert sorted(batchscope.importers.__all__) == sorted(PUBLIC["loaders.importers"])
    assert sorted(batchscope.torch.__all__) == sorted(PUBLIC["loaders.torch"])
    for name in PUBLIC["loaders"]:
        assert getattr(batchscope, name) is getattr(loaders, name), name


def test_old_and_documented_module_paths_import_the_same_objects_in_a_fresh_interpreter():
    """Run in a new process, so every old path is imported for the first time (and warns) there."""
    script = f"""
import importlib, json, warnings
deep, moved = json.loads({json.dumps(json.dumps([DEEP, _moved.MOVED]))})
out = {{"missing": [], "different": [], "silent": []}}
for old, new in moved.items():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = importlib.import_module("loaders." + old)
    if not any(issubclass(w.category, DeprecationWarning) and new in str(w.message) for w in caught):
        out["silent"].append(old)
    if before is not importlib.import_module("loaders." + new) or before.__spec__.name != "loaders." + new:
        out["different"].append(old)
for module, names in deep.items():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        mod = importlib.import_module(module)
    out["missing"] += [f"{{module}}.{{n}}" for n in names if not hasattr(mod, n)]
print(json.dumps(out))
"""
    done = subprocess.run([sys.executable, "-c", script], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout) == {"missing": [], "different": [], "silent": []}


def test_every_moved_path_names_a_module_that_exists_and_no_old_module_is_left_at_the_top():
    top = ROOT / "loaders"
    for old, new in _moved.MOVED.items():
        assert (top / (new.replace(".", "/") + ".py")).is_file(), new
        assert not (top / f"{old}.py").exists(), f"loaders/{old}.py is both moved and present"
    modules = [p.name for p in top.glob("*.py")]
    assert len(modules) <= 12, modules
