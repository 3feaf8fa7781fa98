"""The demo's runs, made by really training small models under the reader (with one elastic resume)."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from loaders import Batch, Catalog, Pack, RandomResizedCrop, ReadPlan, Run, SampleFrames, Shuffle, Source, Tokenize, UseTokens

from .bigram import LinearAutoencoder, OnlineBigram, TabularPolicy

Log = Callable[[str], None]


def pretrain_plan(seed: int) -> ReadPlan:
    """Packed ``web-text`` tokens mixed 70/30 with pre-tokenized ``sft-chat`` (whose broken samples reach the model)."""
    return ReadPlan(
        [
            Source("web-text@v1", weight=0.7, transforms=[Tokenize("text")]),
            Source("sft-chat@v1", weight=0.3, transforms=[UseTokens("input_ids", "loss_mask")]),
        ],
        seed=seed,
        global_batch_size=8,
        steps=240,
        streams=4,
        transforms=[Pack(seq_len=256, docs_per_block=24)],
    )


def multimodal_plan(seed: int) -> ReadPlan:
    """Random-resized crops of ``images`` mixed with 4 frames sampled from each ``videos`` clip."""
    return ReadPlan(
        [
            Source("images@v1", weight=3, transforms=[RandomResizedCrop("image", size=(64, 64), scale=(0.3, 1.0))]),
            Source("videos@v1", weight=1, transforms=[SampleFrames("video", k=4, stride=6)]),
        ],
        seed=seed,
        global_batch_size=4,
        steps=80,
        streams=2,
    )


#: What a model step returns for the batches of every rank: each rank's loss, per-sample losses and other metrics.
StepResult = tuple[list[float], list[list[float]], list[dict]]


def _train(run: Run, world_size: int, steps: range, model_step: Callable[[list[Batch]], StepResult], state: dict | None = None) -> dict:
    """Drive one reader per rank in lockstep (as ranks of one job would) and log real losses."""
    readers = [run.reader(rank, world_size, start_step=steps.start, end_step=steps.stop, flush_seconds=0.5) for rank in range(world_size)]
    if state is not None:
        for reader in readers:
            reader.load_state_dict(state)
    try:
        for batches in zip(*readers):
            losses, per_sample, extra = model_step(list(batches))
            for reader, batch, loss, samples, more in zip(readers, batches, losses, per_sample, extra):
                reader.log(batch.step, loss=loss, sample_loss=samples, **more)
        return readers[0].state_dict()
    finally:
        for reader in readers:
            reader.close()


def train_pretrain(catalog: Catalog, seed: int, log: Log) -> Run:
    """``demo-pretrain``: 2 ranks for the first half, then resumed from saved state on 1 rank."""
    run = catalog.create_run("demo-pretrain", pretrain_plan(seed), exist_ok=True)
    vocab = catalog.tokenizer("demo-bpe").get_vocab_size()
    model = OnlineBigram(vocab)

    def step(batches: list[Batch]) -> StepResult:
        losses, per_sample, token_loss = [], [], []
        for batch in batches:
            ids = np.array([s.inputs["input_ids"] for s in batch.samples])
            mask = np.array([s.inputs["loss_mask"] for s in batch.samples])
            loss, samples = model.step(ids, mask)
            losses.append(loss)
            per_sample.append(samples)
            token_loss.append({"token_loss": model.token_loss})  # drawn as heat on the step/rank page
        return losses, per_sample, token_loss

    half = run.total_steps // 2
    log(f"  training demo-pretrain: steps 0-{half - 1} on 2 ranks")
    state = _train(run, 2, range(0, half), step)
    log(f"  resuming demo-pretrain from saved state at step {state['step']} on 1 rank")
    _train(run, 1, range(state["step"], run.total_steps), step, state=state)
    return run


def train_multimodal(catalog: Catalog, seed: int, log: Log) -> Run:
    """``demo-multimodal``: a linear autoencoder over image crops and video frames, on 2 ranks."""
    run = catalog.create_run("demo-multimodal", multimodal_plan(seed), exist_ok=True)
    model = LinearAutoencoder(seed=seed)

    def features(sample) -> np.ndarray:
        if "frames" in sample.inputs:
            return np.mean([LinearAutoencoder.features(f) for f in sample.inputs["frames"]], axis=0)
        return LinearAutoencoder.features(sample.inputs["image"])

    def step(batches: list[Batch]) -> StepResult:
        losses, per_sample = [], []
        for batch in batches:
            loss, samples = model.step(np.stack([features(s) for s in batch.samples]))
            losses.append(loss)
            per_sample.append(samples)
        return losses, per_sample, [{} for _ in batches]

    log(f"  training demo-multimodal: {run.total_steps} steps on 2 ranks")
    _train(run, 2, range(0, run.total_steps), step)
    return run


def rl_plan(seed: int) -> ReadPlan:
    """GRPO-style consumption of ``rl-rollouts``: rollouts in stored order (groups stay together), 16 per step."""
    return ReadPlan(
        [Source("rl-rollouts@v1")],
        seed=seed,
        global_batch_size=16,
        epochs=1,
        streams=1,
        shuffle=Shuffle(enabled=False),
    )


def rl_metrics(batch: Batch) -> dict[str, Any]:
    """What an RL trainer logs per step: mean reward, zero-variance group share, truncation rate, a PG surrogate loss
    (the mean of each rollout's, logged per rollout as ``sample_loss``)."""
    rollouts = [s.record["rollout"] for s in batch.samples]
    rewards = np.array([float(r["reward"]) for r in rollouts])
    groups: dict[str, list[float]] = {}
    for r in rollouts:
        groups.setdefault(str(r["group_id"]), []).append(float(r["reward"]))
    zero_variance = sum(1 for g in groups.values() if len(g) > 1 and max(g) == min(g)) / max(1, len(groups))
    per_rollout = [-float(r["advantage"]) * float(np.mean(r["logprobs"] or [0.0])) for r in rollouts]
    return {
        "loss": float(np.mean(per_rollout)),
        "sample_loss": per_rollout,
        "mean_reward": float(rewards.mean()),
        "zero_variance_share": zero_variance,
        "truncation_rate": float(np.mean([r["finish_reason"] == "length" for r in rollouts])),
    }


def train_rl(catalog: Catalog, seed: int, log: Log) -> Run:
    """``demo-rl``: one pass over the rollouts logging RL metrics per step (plotted on the run page)."""
    run = catalog.create_run("demo-rl", rl_plan(seed), exist_ok=True)
    log(f"  consuming demo-rl: {run.total_steps} steps on 1 rank")
    with run.reader(0, 1, flush_seconds=0.5) as reader:
        for batch in reader:
            reader.log(batch.step, **rl_metrics(batch))
    return run


def episodes_plan(seed: int) -> ReadPlan:
    """Policy-gradient updates over recorded ``episodes``: 4 episodes per step, 3 epochs, shuffled."""
    return ReadPlan([Source("episodes@v1")], seed=seed, global_batch_size=4, epochs=3, streams=2)


def train_episodes(catalog: Catalog, seed: int, log: Log) -> Run:
    """``demo-episodes``: REINFORCE on a tabular policy from the gridworld episodes, on 2 ranks.

    Each episode's loss is ``-(return - batch mean) * sum_t log pi(a_t | env)``; the ranks log it per episode, with
    the mean return and the share of episodes that reached the goal.
    """
    run = catalog.create_run("demo-episodes", episodes_plan(seed), exist_ok=True)
    policy = TabularPolicy()

    def step(batches: list[Batch]) -> StepResult:
        episodes = [[s.record for s in batch.samples] for batch in batches]
        losses, per_sample = policy.step(episodes)
        extra = [
            {
                "mean_return": float(np.mean([float(r["return"]) for r in records])),
                "success_rate": float(np.mean([r["termination"] == "goal" for r in records])),
            }
            for records in episodes
        ]
        return losses, per_sample, extra

    log(f"  training demo-episodes: {run.total_steps} steps on 2 ranks")
    _train(run, 2, range(0, run.total_steps), step)
    return run
