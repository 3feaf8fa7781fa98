"""Megatron-LM's training arguments as the replay reads them (flags, files), and the sampler arithmetic both ways;
none of it needs megatron-core."""

from __future__ import annotations

import sys

import pytest

from loaders.errors import InvalidPlan, RankOutOfRange, RegistrationError, StepOutOfRange
from loaders.replay.megatron import Position, Schedule, parse_args, read_args_file

BASE = ["--data-path", "/d/a", "--seq-length", "16", "--micro-batch-size", "2", "--data-parallel-size", "2", "--train-iters", "60"]
BASE += ["--tokenizer-type", "NullTokenizer", "--vocab-size", "500"]


def test_flags_read_as_megatron_reads_them_and_the_rest_are_ignored():
    args = parse_args([*BASE, "--num-layers", "2", "--lr", "3e-4", "--bf16", "--global-batch-size", "16", "--seed", "9"])
    assert (args.prefixes, args.weights, args.split, args.seed, args.global_batch_size) == (("/d/a",), None, "969, 30, 1", 9, 16)
    assert args.tokenizer_args["vocab_size"] == 500 and args.tokenizer_args["tokenizer_type"] == "NullTokenizer"
    blend = parse_args([*BASE, "--data-path", "30", "/d/a", "70", "/d/b", "--split", "90,8,2"])
    assert (blend.prefixes, blend.weights, blend.split) == (("/d/a", "/d/b"), (30.0, 70.0), "90,8,2")
    assert parse_args([*BASE, "--data-path", "/d/a", "/d/b"]).weights is None  # weights from the dataset sizes
    derived = parse_args(
        [a for a in BASE if a not in ("--data-parallel-size",)][:6] + BASE[8:] + ["--world-size", "8", "--tensor-model-parallel-size", "2"]
    )
    assert derived.data_parallel_size == 4 and derived.global_batch_size == 8


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (
            ["--global-batch-size", "10"],
            "data-parallel size 2 cannot produce global batch size 10: it is not a multiple of micro batch size 2",
        ),
        (["--mock-data"], "--mock-data reads generated data, not files"),
        (["--dataloader-type", "cyclic"], "--dataloader-type cyclic is not supported"),
        (["--phase-transition-iterations", "10,20"], "--phase-transition-iterations restarts the sampler per phase"),
        (["--legacy-tokenizer"], "--legacy-tokenizer builds Megatron-LM's own tokenizer"),
        (["--rampup-batch-size", "4", "4", "100"], "--rampup-batch-size needs --train-samples"),
        (["--train-samples", "100"], "give exactly one of --train-iters and --train-samples"),
        (["--data-path", "-1", "/d/a", "2", "/d/b"], "--data-path weights must be positive"),
    ],
)
def test_settings_the_replay_cannot_reproduce_are_refused_in_one_line(extra, message):
    with pytest.raises(InvalidPlan, match=message) as raised:
        parse_args([*BASE, *extra])
    assert "\n" not in str(raised.value)


def test_missing_settings_are_named():
    with pytest.raises(InvalidPlan, match="--data-parallel-size \\(or --world-size\\) is required"):
        parse_args(["--data-path", "/d/a", "--seq-length", "8", "--micro-batch-size", "1", "--train-iters", "4"])
    with pytest.raises(InvalidPlan, match="--seq-length required"):
        parse_args(["--data-path", "/d/a", "--micro-batch-size", "1", "--train-iters", "4", "--data-parallel-size", "1"])


def test_an_arguments_file_is_a_launch_script_or_a_mapping(tmp_path):
    script = tmp_path / "run.sh"
    script.write_text("# the job\nexport X=1\ntorchrun pretrain_gpt.py \\\n  " + " \\\n  ".join(BASE) + "  # data\n")
    assert read_args_file(script) == parse_args(BASE)
    mapping = tmp_path / "args.yaml"
    mapping.write_text(
        "data_path: [/d/a]\nseq_length: 16\nmicro_batch_size: 2\ndata_parallel_size: 2\ntrain_iters: 60\ntokenizer_type: NullTokenizer\nvocab_size: 500\n"
    )
    assert read_args_file(mapping) == parse_args(BASE)
    with pytest.raises(RegistrationError, match="arguments file .*missing.sh: No such file"):
        read_args_file(tmp_path / "missing.sh")
    (tmp_path / "bad.json").write_text("[1, 2]")
    with pytest.raises(RegistrationError, match="expected a mapping"):
        read_args_file(tmp_path / "bad.json")


def test_the_sampler_gives_each_rank_consecutive_micro_batches_and_locate_inverts_it():
    schedule = Schedule(global_batch_size=12, micro_batch_size=2, data_parallel_size=3, train_samples=100)
    assert schedule.total_iterations == 8 and schedule.microbatches_at(5) == 2
    assert [list(schedule.samples(1, rank=r, microbatch=m)) for m in range(2) for r in range(3)] == [
        [12, 13], [14, 15], [16, 17], [18, 19], [20, 21], [22, 23],
    ]  # fmt: skip
    for iteration in range(schedule.total_iterations):
        for rank in range(3):
            for microbatch in range(2):
                for row, sample in enumerate(schedule.samples(iteration, rank=rank, microbatch=microbatch)):
                    assert schedule.locate(sample) == Position(iteration, rank, microbatch, row)
    assert schedule.locate(96) is None and schedule.consumed_total == 96  # the last partial global batch is never read
    with pytest.raises(StepOutOfRange, match="iteration 8 is beyond the run: it has iterations 0..7"):
        schedule.samples(8, rank=0, microbatch=0)
    with pytest.raises(RankOutOfRange, match="rank 3 does not exist"):
        schedule.check(0, 3)


def test_the_module_imports_without_megatron_core():
    import subprocess

    code = "import sys; sys.modules['megatron'] = None; import loaders.replay.megatron as m; print(m.parse_args)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True).returncode == 0
