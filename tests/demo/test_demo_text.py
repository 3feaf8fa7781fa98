"""The demo's text datasets (web-text, sft-chat, rl-rollouts), its tokenizer and the ChatML template."""

from __future__ import annotations

import math
import re
import statistics
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tokenizers import Tokenizer, models

from batchscope_demo import chat, rollouts, stdlib_docs, text
from batchscope_demo.common import load_changes
from batchscope_demo.tokenizer import NAME as TOKENIZER
from batchscope_demo.tokenizer import SPECIAL_TOKENS, train_tokenizer
from loaders import Catalog, DecodeError
from loaders.transforms.chat import IM_END, IM_START, chat_text, render_chat

BUILDERS = {"web-text": text.build, "sft-chat": chat.build, "rl-rollouts": rollouts.build}


def rows(catalog: Catalog, ref: str) -> dict[str, dict]:
    """Every record of a version by key, read back through ``version.read``."""
    version = catalog.resolve(ref)
    out = {}
    for shard, info in enumerate(version.shards):
        for record in version.read(shard, list(range(info.rows))):
            out[record["id"]] = record
    return out


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Catalog:
    catalog = Catalog(tmp_path_factory.mktemp("demo") / "root")
    for build in BUILDERS.values():
        build(catalog, seed=7)
    return catalog


@pytest.fixture(scope="module")
def tokenizer(demo: Catalog):
    return demo.tokenizer(TOKENIZER)


# -- determinism ---------------------------------------------------------------------------------


def test_building_again_with_the_same_seed_gives_the_same_versions(demo: Catalog) -> None:
    ids = {name: (demo.resolve(f"{name}@v1").id, demo.resolve(f"{name}@v2").id) for name in BUILDERS}
    tokenizer_id = demo.tokenizer_id(TOKENIZER)
    for build in BUILDERS.values():
        build(demo, seed=7)
    assert {name: (demo.resolve(f"{name}@v1").id, demo.resolve(f"{name}@v2").id) for name in BUILDERS} == ids
    assert demo.tokenizer_id(TOKENIZER) == tokenizer_id
    assert all(len(demo.versions(name)) == 2 for name in BUILDERS)


def shard_checksums(catalog: Catalog, ref: str) -> list[str]:
    return [shard.checksum for shard in catalog.resolve(ref).shards]


def test_the_seed_alone_decides_the_data(tmp_path: Path, demo: Catalog) -> None:
    same, other = Catalog(tmp_path / "same"), Catalog(tmp_path / "other")
    rollouts.build(same, seed=7)
    rollouts.build(other, seed=8)
    assert shard_checksums(same, "rl-rollouts@v2") == shard_checksums(demo, "rl-rollouts@v2")
    assert shard_checksums(other, "rl-rollouts@v2") != shard_checksums(demo, "rl-rollouts@v2")


def test_tokenizer_training_is_deterministic() -> None:
    docs = [doc.text for doc in stdlib_docs.stdlib_docs()[:400]]
    first, second = train_tokenizer(docs, vocab_size=800), train_tokenizer(docs, vocab_size=800)
    assert first.to_str() == second.to_str()
    assert [first.token_to_id(t) for t in SPECIAL_TOKENS] == [0, 1, 2, 3]


def test_demo_tokenizer_is_a_byte_level_bpe(tokenizer) -> None:
    assert 2000 <= tokenizer.get_vocab_size() <= 4000
    sample = "Return the JSON object — décodé, naïve 🙂.\n\tdef f(x): ..."
    assert tokenizer.decode(tokenizer.encode(sample).ids) == sample


# -- the ChatML template -------------------------------------------------------------------------


def test_render_chat_masks_assistant_content_and_its_end(tokenizer) -> None:
    messages = [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is 2 + 2?"},
        {"role": "assistant", "content": "4"},
    ]
    ids, mask, spans = render_chat(messages, tokenizer)
    assert tokenizer.decode(ids, skip_special_tokens=False) == chat_text(messages)
    assert [role for role, _, _ in spans] == ["system", "user", "assistant"]
    role, start, end = spans[2]
    trained = [tokenizer.id_to_token(ids[i]) for i in range(len(ids)) if mask[i]]
    assert tokenizer.decode([tokenizer.token_to_id(t) for t in trained], skip_special_tokens=False) == "4" + IM_END
    assert mask[:start] == [0] * start and mask[end - 1] == 0 and ids[start] == tokenizer.token_to_id(IM_START)


@settings(max_examples=40, deadline=None)
@given(
    turns=st.lists(
        st.tuples(
            st.sampled_from(["system", "user", "assistant", "tool"]),
            st.text(alphabet=st.characters(codec="utf-8", exclude_characters="<|>"), max_size=30),
        ),
        max_size=5,
    )
)
def test_render_chat_properties(tokenizer, turns: list[tuple[str, str]]) -> None:
    messages = [{"role": role, "content": content} for role, content in turns]
    ids, mask, spans = render_chat(messages, tokenizer)
    assert len(ids) == len(mask)
    assert tokenizer.decode(ids, skip_special_tokens=False) == chat_text(messages)
    bounds = [0] + [end for _, _, end in spans]
    assert [(start, end) for _, start, end in spans] == list(zip(bounds, bounds[1:])) and bounds[-1] == len(ids)
    expected = sum(len(tokenizer.encode(content, add_special_tokens=False).ids) + 1 for role, content in turns if role == "assistant")
    assert sum(mask) == expected


@pytest.mark.parametrize(
    ("messages", "message"),
    [
        ([{"content": "hi"}], "chat message 0 has no role"),
        ([{"role": "user", "content": 3}], r"chat message 0 \(user\) has content of type int"),
        (["hi"], "chat message 0 is a str"),
        ([{"role": "user", "content": "\ud800"}], "chat content cannot be tokenized"),
    ],
)
def test_render_chat_rejects_malformed_messages(tokenizer, messages: list, message: str) -> None:
    with pytest.raises(DecodeError, match=message):
        render_chat(messages, tokenizer)


def test_render_chat_needs_the_special_tokens() -> None:
    bare = Tokenizer(models.BPE())
    with pytest.raises(DecodeError, match=r"tokenizer has no chat special token\(s\) <\|endoftext\|>, <\|im_start\|>"):
        render_chat([{"role": "user", "content": "x"}], bare)


# -- web-text ------------------------------------------------------------------------------------


def test_web_text_is_stdlib_prose_with_recorded_changes(demo: Catalog) -> None:
    v1, v2 = rows(demo, "web-text@v1"), rows(demo, "web-text@v2")
    version = demo.resolve("web-text@v1")
    assert version.tokenizer == TOKENIZER and version.kinds["text"] == "text"
    assert 2500 <= len(v1) <= 4000 and "json.loads" in v1
    assert all(r["source"] == "cpython-stdlib" and r["n_chars"] == len(r["text"]) >= stdlib_docs.MIN_CHARS for r in v1.values())
    changes = load_changes(demo, "web-text")
    assert sorted(v2.keys() - v1.keys()) == changes.added and sorted(v1.keys() - v2.keys()) == changes.removed
    assert sorted(k for k in v1.keys() & v2.keys() if v1[k] != v2[k]) == changes.edited
    for share in (len(changes.added), len(changes.removed)):
        assert 0.02 <= share / len(v1) <= 0.04
    assert 0.04 <= len(changes.edited) / len(v1) <= 0.06
    edits = changes.notes["edits"]
    assert sorted(sum(edits.values(), [])) == changes.edited and all(edits.values())
    for key in edits["whitespace_normalized"]:
        assert v2[key]["text"] != v1[key]["text"] and v2[key]["text"].split() == v1[key]["text"].split()
    for key in edits["typo_fixed"]:
        before, after = v1[key]["text"].split(), v2[key]["text"].split()
        diffs = [(a, b) for a, b in zip(before, after) if a != b]
        assert len(before) == len(after) and len(diffs) == 1 and sorted(diffs[0][0]) == sorted(diffs[0][1])


# -- sft-chat ------------------------------------------------------------------------------------


def test_sft_chat_rows_are_rendered_with_the_template(demo: Catalog, tokenizer) -> None:
    changes = load_changes(demo, "sft-chat")
    broken = {key for keys in changes.notes["broken"].values() for key in keys}
    version = demo.resolve("sft-chat@v1")
    assert version.kinds == {"id": "text", "messages": "chat", "input_ids": "tokens", "loss_mask": "mask", "n_tokens": "scalar"}
    for tag in ("v1", "v2"):
        records = rows(demo, f"sft-chat@{tag}")
        assert broken <= records.keys()
        for key, record in records.items():
            assert record["n_tokens"] == len(record["input_ids"]) == len(record["loss_mask"])
            assert 1 <= sum(m["role"] == "user" for m in record["messages"]) <= 4
            if key not in broken:
                ids, mask, _ = render_chat(record["messages"], tokenizer)
                assert (record["input_ids"], record["loss_mask"]) == (ids, mask), key


def test_sft_chat_broken_samples_are_really_broken(demo: Catalog, tokenizer) -> None:
    broken = load_changes(demo, "sft-chat").notes["broken"]
    assert len(broken["missing_end_of_turn"]) >= 3 and len(broken["mask_shifted"]) >= 3 and len(broken["user_trained"]) >= 2
    end = tokenizer.token_to_id(IM_END)
    for tag in ("v1", "v2"):
        records = rows(demo, f"sft-chat@{tag}")
        for key in broken["missing_end_of_turn"]:
            ids, mask, spans = render_chat(records[key]["messages"], tokenizer)
            stored = records[key]["input_ids"]
            assert len(stored) == len(ids) - 1 and stored.count(end) == ids.count(end) - 1
            _, start, stop = next(s for s in spans if s[0] == "assistant")
            assert ids[stop - 2] == end and stored[stop - 2] != end
        for key in broken["mask_shifted"]:
            ids, mask, _ = render_chat(records[key]["messages"], tokenizer)
            assert records[key]["input_ids"] == ids and records[key]["loss_mask"] == [0] + mask[:-1] != mask
        for key in broken["user_trained"]:
            ids, mask, spans = render_chat(records[key]["messages"], tokenizer)
            stored = records[key]["loss_mask"]
            assert records[key]["input_ids"] == ids
            user = [i for role, a, b in spans if role == "user" for i in range(a, b)]
            assert any(stored[i] for i in user) and all(stored[i] == mask[i] for i in range(len(ids)) if i not in user)


def test_sft_chat_v2_rewords_the_system_prompt(demo: Catalog) -> None:
    v1, v2 = rows(demo, "sft-chat@v1"), rows(demo, "sft-chat@v2")
    changes = load_changes(demo, "sft-chat")
    assert sorted(v2.keys() - v1.keys()) == changes.added and sorted(v1.keys() - v2.keys()) == changes.removed
    with_system = {k for k in v1.keys() & v2.keys() if v1[k]["messages"][0]["role"] == "system"}
    assert sorted(with_system) == changes.edited and len(with_system) > len(v1) // 2
    for key in with_system:
        assert v1[key]["input_ids"] != v2[key]["input_ids"] and v1[key]["messages"][1:] == v2[key]["messages"][1:]


# -- rl-rollouts ---------------------------------------------------------------------------------


def true_answer(prompt: str) -> int:
    a, op, b = re.fullmatch(r"What is (-?\d+) (\S) (-?\d+)\?", prompt).groups()  # type: ignore[union-attr]
    return {"+": int(a) + int(b), "-": int(a) - int(b), "×": int(a) * int(b)}[op]


def expected_reward(rollout: dict, *, signed: bool) -> float:
    if rollout["finish_reason"] != "stop":
        return 0.0
    numbers = re.findall(r"-?\d+", rollout["completion"])
    last = int(numbers[-1]) if numbers else None
    if last is not None and not signed:
        last = abs(last)
    return 1.0 if last == true_answer(rollout["prompt"]) else 0.0


def test_rollout_rewards_and_advantages_recomputed(demo: Catalog, tokenizer) -> None:
    assert demo.resolve("rl-rollouts@v1").kinds["rollout"] == "rollout"
    for tag, signed in (("v1", False), ("v2", True)):
        groups: dict[str, list[dict]] = {}
        for record in rows(demo, f"rl-rollouts@{tag}").values():
            rollout = record["rollout"]
            assert rollout["reward"] == expected_reward(rollout, signed=signed), record["id"]
            assert record["step"] == int(rollout["group_id"][1:]) // rollouts.GROUPS_PER_STEP
            groups.setdefault(rollout["group_id"], []).append(rollout)
        assert 140 <= len(groups) <= 160
        flat = {"all right": 0, "all wrong": 0}
        for members in groups.values():
            assert 4 <= len(members) <= 8 and len({m["prompt"] for m in members}) == 1
            rewards = [m["reward"] for m in members]
            mean, std = statistics.fmean(rewards), statistics.stdev(rewards)
            for member in members:
                assert math.isclose(member["advantage"], (member["reward"] - mean) / (std + 1e-6), abs_tol=1e-9)
            if std == 0:
                flat["all right" if rewards[0] == 1.0 else "all wrong"] += 1
        assert flat["all right"] >= 1 and flat["all wrong"] >= 1, flat


def test_rollout_tokens_logprobs_and_turns(demo: Catalog, tokenizer) -> None:
    records = rows(demo, "rl-rollouts@v2")
    reasons = {"stop": 0, "length": 0}
    tool_calls = 0
    for record in records.values():
        r = record["rollout"]
        n = len(r["completion_ids"])
        assert r["prompt_ids"] == tokenizer.encode(r["prompt"], add_special_tokens=False).ids
        assert tokenizer.decode(r["completion_ids"]) == r["completion"]
        assert len(r["logprobs"]) == len(r["ref_logprobs"]) == n > 0
        assert all(lp < 0 for lp in r["logprobs"] + r["ref_logprobs"])
        assert r["logprobs"] != r["ref_logprobs"] and max(abs(a - b) for a, b in zip(r["logprobs"], r["ref_logprobs"])) < 1
        reasons[r["finish_reason"]] += 1
        if r["finish_reason"] == "length":
            assert n == rollouts.MAX_COMPLETION_TOKENS and r["reward"] == 0.0
        if r["turns"] is not None:
            tool_calls += 1
            assert [t["role"] for t in r["turns"]] == ["user", "assistant", "tool", "assistant"]
            assert r["turns"][1]["content"].startswith("calculator(")
            assert r["turns"][2]["content"] == str(true_answer(r["prompt"]))
    assert reasons["length"] >= 10 and reasons["stop"] >= 500 and tool_calls >= 3


def test_rollout_v2_reward_fix_is_recorded(demo: Catalog) -> None:
    v1, v2 = rows(demo, "rl-rollouts@v1"), rows(demo, "rl-rollouts@v2")
    changes = load_changes(demo, "rl-rollouts")
    assert sorted(v2.keys() - v1.keys()) == changes.added and sorted(v1.keys() - v2.keys()) == changes.removed
    assert changes.added and changes.removed
    edited = sorted(k for k in v1.keys() & v2.keys() if v1[k] != v2[k])
    assert edited == changes.edited and edited
    for key in edited:
        before, after = v1[key]["rollout"], v2[key]["rollout"]
        assert {f for f in before if before[f] != after[f]} <= {"reward", "advantage"}
    changed_rewards = [k for k in edited if v1[k]["rollout"]["reward"] != v2[k]["rollout"]["reward"]]
    assert changed_rewards
    for key in changed_rewards:  # only answers with a sign were scored differently
        rollout = v2[key]["rollout"]
        assert re.search(r"-\d", rollout["completion"]) or true_answer(rollout["prompt"]) < 0
