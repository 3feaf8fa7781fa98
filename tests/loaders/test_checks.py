"""``batchscope lint``'s checks: every planted bug kind is found, and nothing else; packed documents, failed batches,
records read twice in a step, padding, loss spikes and a recorded run's mix; data that changed stops the lint."""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from loaders import Catalog, ChecksumMismatch, InvalidQuery, ReadPlan, Source, StepOutOfRange, Tokenize
from loaders.checks import CHECK, Finding, LintOptions, lint
from loaders.checks.lint import split
from tests.conftest import word_tokenizer, write_parquet
from tests.support.forensics import DIP, SPIKE, STEPS, build_forensics_catalog
from tests.support.lint_catalog import PLANTED, REWARD_RANGE, RUNS, RecordedBatches


@pytest.fixture
def planted(lint_catalog: Catalog) -> Catalog:
    return lint_catalog


def keys_by_check(findings: tuple[Finding, ...]) -> dict[str, set[str | None]]:
    found: dict[str, set[str | None]] = defaultdict(set)
    for f in findings:
        found[f.check].add(f.key)
    return dict(found)


def options_for(run: str) -> LintOptions:
    return LintOptions.parse(thresholds=REWARD_RANGE) if run == "lint-rollouts" else LintOptions()


@pytest.mark.parametrize("name", sorted(RUNS))
def test_every_planted_bug_is_found_and_nothing_else(planted: Catalog, name: str) -> None:
    result = lint(planted.run(name), catalog=planted, options=options_for(name), workers=1)
    found = keys_by_check(result.findings)
    for check in RUNS[name]:
        assert found.get(check) == PLANTED[check], check
    assert set(found) <= set(RUNS[name])
    for finding in result.findings:
        assert finding.severity == CHECK[finding.check].severity
        assert finding.rank is not None and finding.position is not None  # every one of these is about a sample read


def test_packed_documents_are_judged_like_unpacked_ones(planted: Catalog) -> None:
    """Packing cuts documents across sequences: each is still judged once per read, on the pieces the model got."""
    unpacked = keys_by_check(lint(planted.run("lint-texts"), catalog=planted, workers=1).findings)
    run = planted.run("lint-packed")
    packed = lint(run, catalog=planted, workers=1)
    found = keys_by_check(packed.findings)
    padding = [f for f in packed.findings if f.check == "mostly-padding"]
    found.pop("mostly-padding", None)
    assert found == unpacked
    # read format 4: a stream that delivered its epoch pads its later sequences, and only those are mostly padding
    assert padding and all(f.key is None for f in padding)
    last = {f.step for f in padding}
    assert min(last) >= run.total_steps - 2, sorted(last)
    assert packed.documents > packed.samples  # sequences hold several documents


def test_a_batch_that_cannot_be_decoded_is_a_finding_for_its_rank(planted: Catalog) -> None:
    run = planted.run("lint-crops")
    result = lint(run, catalog=planted, workers=1)
    failure, *blank = result.findings
    assert (failure.check, failure.step, failure.rank, failure.position, failure.key) == ("decode-failure", 0, 0, None, None)
    assert "dataset pics" in failure.detail and "row 0" in failure.detail and "cannot decode image" in failure.detail
    assert result.failed_batches == 1 and result.samples == (run.total_steps - 1) * run.global_batch_size  # the other steps were linted
    # the crops of the blank pictures are blank (and confirmed on the stored picture); no crop of a good one is
    assert {(f.check, f.key) for f in blank} == {("blank-image", "pic-black"), ("blank-image", "pic-gray")}
    assert all(f.detail.endswith("(model input; the stored image too)") for f in blank)


def test_a_record_read_twice_in_one_step_is_a_duplicate_read_each_time(planted: Catalog) -> None:
    result = lint(planted.run("lint-tiny"), catalog=planted, workers=1)
    assert {f.check for f in result.findings} == {"duplicate"} and len(result.findings) == result.samples == 16
    assert all("times in step" in f.detail for f in result.findings)


def test_content_read_under_two_keys_is_found_at_both_reads(planted: Catalog) -> None:
    result = lint(planted.run("lint-texts"), catalog=planted, options=LintOptions.parse(checks=["duplicate"]), workers=1)
    a, b = sorted(result.findings, key=lambda f: f.key or "")
    assert (a.key, b.key) == ("text-dup-a", "text-dup-b")
    assert a.detail.startswith(f"same content as text-dup-b (step {b.step} rank {b.rank} sample {b.position})")


def test_a_recorded_run_is_linted_through_the_run_kind_interface(planted: Catalog) -> None:
    native = planted.run("lint-texts")
    recorded = RecordedBatches(native, name="recorded-texts")
    assert lint(recorded, catalog=planted, workers=1).findings == lint(native, catalog=planted, workers=1).findings


def test_a_step_far_from_the_planned_mix_is_found(planted: Catalog) -> None:
    """A recorded job that declared 50/50 between texts and chats but read only texts: every step is far from its plan."""
    native = planted.run("lint-wide")
    declared = {"resolved": {"sources": [{"ref": "texts@v1", "weight": 1}, {"ref": "chats@v1", "weight": 1}]}}
    recorded = RecordedBatches(native, name="recorded-mix", manifest=declared)
    result = lint(recorded, catalog=planted, options=LintOptions.parse(checks=["mix-off-plan"]), workers=1)
    assert [f.step for f in result.findings] == list(range(native.total_steps))
    assert result.findings[0].detail.startswith("texts@v1: 32 of 32 samples (100%) against 50% planned")
    assert lint(native, catalog=planted, options=LintOptions.parse(checks=["mix-off-plan"]), workers=1).findings == ()


def test_mostly_padding_steps_and_loss_spikes_after_warm_up(tmp_path: Path) -> None:
    catalog = build_forensics_catalog(tmp_path, write_parquet, word_tokenizer)
    result = lint(catalog.run("spiky"), catalog=catalog, options=LintOptions.parse(checks=["mostly-padding", "loss-spike"]), workers=1)
    padding = [f for f in result.findings if f.check == "mostly-padding"]
    assert [f.step for f in padding] == list(range(STEPS)) and all(f.rank is None and f.key is None for f in padding)
    spikes = [(f.step, f.detail.split(":")[0]) for f in result.findings if f.check == "loss-spike"]
    assert spikes == [(SPIKE, "spike"), (DIP, "dip")]


def test_bad_input_is_one_clear_error(planted: Catalog) -> None:
    with pytest.raises(InvalidQuery, match="unknown check 'no-such'; checks: empty-document, "):
        LintOptions.parse(checks=["no-such"])
    with pytest.raises(InvalidQuery, match=r"check repetition has no threshold 'n' \(its thresholds: min_tokens, max_period"):
        LintOptions.parse(thresholds=["repetition.n=3"])
    with pytest.raises(InvalidQuery, match=r"threshold repetition.max_period = 99 is outside \[1, 64\]"):
        LintOptions.parse(thresholds={"repetition.max_period": 99})
    with pytest.raises(InvalidQuery, match="is not a number"):
        LintOptions.parse(thresholds=["repetition.min_tokens=lots"])
    run = planted.run("lint-tiny")
    with pytest.raises(StepOutOfRange, match=r"steps 1:5 are outside run lint-tiny \(steps 0 to 1; A:B takes B exclusive\)"):
        lint(run, catalog=planted, steps=range(1, 5))
    assert split(range(0, 3), 8) == [range(0, 1), range(1, 2), range(2, 3)]


def test_data_changed_since_registration_stops_the_lint(tmp_path: Path) -> None:
    catalog = Catalog(tmp_path / "catalog")
    catalog.put_tokenizer("words", word_tokenizer(["alpha", "beta", "gamma"]))
    table = pa.table({"id": [f"d{i}" for i in range(12)], "text": ["alpha beta gamma " * (1 + i % 3) for i in range(12)]})
    (path,) = write_parquet(table, tmp_path / "src")
    catalog.register("docs", [path], key="id", tag="v1", tokenizer="words")
    run = catalog.create_run(
        "changed", ReadPlan([Source("docs@v1", transforms=[Tokenize("text")])], seed=0, global_batch_size=4, epochs=1, streams=1)
    )
    pq.write_table(table.set_column(1, "text", pa.array(["gamma beta alpha"] * 12)), path, row_group_size=3)  # same size, other bytes
    with pytest.raises(ChecksumMismatch, match="run changed: its data changed since it was registered, so the lint stopped"):
        lint(run, catalog=catalog, workers=1)


@pytest.mark.slow
def test_worker_processes_find_exactly_what_one_process_finds(planted: Catalog) -> None:
    run = planted.run("lint-texts")
    assert lint(run, catalog=planted, workers=2).findings == lint(run, catalog=planted, workers=1).findings


def test_the_demo_planted_bugs_are_all_found(demo_catalog: Catalog) -> None:
    """The demo's broken chats (user turns trained, masks shifted, end-of-turn tokens missing) wherever the pretraining run
    read them, and every rollout group the v1 reward bug left flat; its warm-up is no loss spike."""
    from batchscope_demo.common import load_changes

    broken = load_changes(demo_catalog, "sft-chat").notes["broken"]
    pretrain = demo_catalog.run("demo-pretrain")
    result = lint(pretrain, catalog=demo_catalog)
    found = keys_by_check(result.findings)
    read = {d.key for step in range(pretrain.total_steps) for b in pretrain.global_batch(step) for s in b.samples for d in s.documents}
    assert found["chat-mask"] == read & {k for kind in ("mask_shifted", "user_trained") for k in broken[kind]}
    assert found["end-of-turn"] == read & set(broken["missing_end_of_turn"])
    assert set(found) - {"duplicate"} == {"chat-mask", "end-of-turn"}
    for finding in (f for f in result.findings if f.check == "duplicate"):
        # the run goes on past its sources' first epoch, so streams in different epochs may read a record in one step:
        # a true finding, and only then
        batch = pretrain.batch(finding.step, finding.rank)
        epochs = [d.epoch for s in batch.samples for d in s.documents if d.key == finding.key]
        assert len(epochs) == len(set(epochs)) > 1, (finding, epochs)
    rl = lint(demo_catalog.run("demo-rl"), catalog=demo_catalog)
    flat = load_changes(demo_catalog, "rl-rollouts").notes["zero_variance_groups"]["v1"]
    assert {f.detail.split(":")[0].removeprefix("group ") for f in rl.findings} == set(flat)
    assert {f.check for f in rl.findings} == {"rl-zero-variance"}
    assert lint(demo_catalog.run("demo-multimodal"), catalog=demo_catalog).findings == ()


def _clean_catalog(demo: Catalog, root: Path) -> Catalog:
    """The demo's datasets registered again (by reference) in a catalog of their own, with runs that read each once."""
    from loaders import Shuffle, UseTokens

    catalog = Catalog(root)
    catalog.put_tokenizer("demo-bpe", demo.tokenizer_json("demo-bpe"))
    for ref in ("web-text@v1", "sft-chat@v1", "rl-rollouts@v2", "images@v2", "videos@v2"):
        version = demo.resolve(ref)
        catalog.register(version.name, [s.uri for s in version.shards], key=version.key, tag="v", tokenizer=version.tokenizer)
    catalog.create_run(
        "text", ReadPlan([Source("web-text@v", transforms=[Tokenize("text")])], seed=0, global_batch_size=16, epochs=1, streams=1)
    )
    catalog.create_run(
        "chat",
        ReadPlan(
            [Source("sft-chat@v", transforms=[UseTokens("input_ids", "loss_mask")])], seed=0, global_batch_size=16, epochs=1, streams=1
        ),
    )
    catalog.create_run(
        "rl", ReadPlan([Source("rl-rollouts@v")], seed=0, global_batch_size=16, epochs=1, streams=1, shuffle=Shuffle(enabled=False))
    )
    catalog.create_run(
        "media", ReadPlan([Source("images@v", weight=10), Source("videos@v", weight=1)], seed=0, global_batch_size=4, epochs=1, streams=1)
    )
    return catalog


def test_clean_data_stays_below_each_documented_false_positive_rate(demo_catalog: Catalog, tmp_path: Path) -> None:
    """Real text (3,232 standard-library docstrings), chats, rollouts, images and clips: what a check flags beyond the
    demo's planted bugs (the broken chats; groups whose rewards really are all equal) is a false positive."""
    from batchscope_demo.common import load_changes

    catalog = _clean_catalog(demo_catalog, tmp_path / "clean")
    broken = {k for keys in load_changes(demo_catalog, "sft-chat").notes["broken"].values() for k in keys}
    flat = set(load_changes(demo_catalog, "rl-rollouts").notes["zero_variance_groups"]["v2"])
    reads, steps, false = 0, 0, defaultdict(int)
    for name in ("text", "chat", "rl", "media"):
        run = catalog.run(name)
        result = lint(run, catalog=catalog)
        reads, steps = reads + result.documents, steps + len(result.steps)
        for f in result.findings:
            planted = (f.check in ("chat-mask", "end-of-turn") and f.key in broken) or (
                f.check == "rl-zero-variance" and f.detail.split(":")[0].removeprefix("group ") in flat
            )
            false[f.check] += not planted
    assert reads > 4_500
    for check in CHECK.values():
        units = steps if check.scope == "step" or check.name == "loss-spike" else reads
        assert false[check.name] / units <= check.false_positives, (check.name, false[check.name], units)


def test_the_docs_table_is_the_registry() -> None:
    """docs/lint.md lists every check once, with its severity, every threshold at its default, and its bound."""
    text = (Path(__file__).resolve().parents[2] / "docs" / "lint.md").read_text()
    rows = {}
    for line in text.splitlines():
        if line.startswith("| `") and line.count("|") >= 7:
            cells = [c.strip() for c in line.strip("|").split(" | ")]
            rows[cells[0].strip("`")] = cells
    assert list(rows) == list(CHECK)
    for name, (_, severity, _rule, thresholds, _clean, bound) in rows.items():
        check = CHECK[name]
        assert severity == check.severity and bound == f"{check.false_positives * 100:g} %", name
        for param in check.params:
            assert (f"`{param.name}` = {param.default}" if param.default is not None else f"`{param.name}`") in thresholds, (name, param)
        assert (thresholds == "—") == (not check.params), name
