"""Renderers: token overlays, packed documents, chat consistency checks, visible whitespace, bounded JSON trees."""

from __future__ import annotations

import re
import unicodedata

from fastapi.testclient import TestClient
from hypothesis import given
from hypothesis import strategies as st

from app import urls
from app.renderers.basic import JsonView, json_tree
from app.renderers.registry import ErrorView, FieldContext, kinds_with_renderers, render_field
from app.renderers.text import segments
from app.renderers.tokens import companions, token_view
from app.templating import Templates
from loaders import Catalog
from loaders.transforms.chat import IM_END
from tests.app.dom import soup


def classes(view) -> list[str]:
    return [t.classes for t in view.tokens]


def test_token_overlays() -> None:
    view = token_view(
        [10, 11, 12, 13],
        mask=[0, 1, 1, 0],
        position_ids=[0, 1, 0, 1],
        values=[0.0, 1.0, None, 0.5],
        value_name="loss",
    )
    assert classes(view) == ["t0 masked heat0", "t1 trained heat7", "t0 trained doc-start pos-reset", "t1 masked heat4"]
    assert (view.count, view.trained, view.documents, view.value_min, view.value_max) == (4, 2, 2, 0.0, 1.0)
    assert view.tokens[2].title == "#2 · id 12 · piece '12' · trained · document 2 starts · position 0 · loss n/a"
    assert view.warnings == []


def test_labels_mark_masked_positions_and_lengths_are_checked() -> None:
    view = token_view([1, 2, 3], labels=[-100, 2, 3, 4])
    assert [t.classes.split()[-1] for t in view.tokens] == ["masked", "trained", "trained"]
    assert view.warnings == ["labels have 4 entries for 3 tokens"]
    assert token_view([1, 2], mask=[1]).warnings == ["loss mask has 1 entries for 2 tokens"]


def test_logprob_heat_runs_the_other_way() -> None:
    view = token_view([1, 2], values=[-5.0, -0.1], value_name="logprobs")
    assert classes(view) == ["t0 heat7", "t1 heat0"]


def test_special_tokens_and_pieces_from_the_tokenizer(inspector_catalog: Catalog) -> None:
    tokenizer = inspector_catalog.tokenizer("chat-words")
    ids = tokenizer.encode("<|im_start|>user say hello<|im_end|>").ids
    view = token_view(ids, tokenizer=tokenizer)
    assert [t.piece for t in view.tokens] == ["<|im_start|>", "user", "say", "hello", IM_END]
    assert ["special" in t.classes.split() for t in view.tokens] == [True, False, False, False, True]


def test_companions_of_a_packed_record() -> None:
    record = {"id": "p", "input_ids": [1, 2, 3], "position_ids": [0, 0, 1], "loss": [0.1, 0.2, 0.3], "attention_mask": [1, 1, 1]}
    kinds = {"id": "text", "input_ids": "tokens", "position_ids": "tokens", "loss": "json", "attention_mask": "mask"}
    found = companions(FieldContext("input_ids", "tokens", record, kinds), 3)
    assert found == {"position_ids": [0, 0, 1], "values": [0.1, 0.2, 0.3], "value_name": "loss"}


def test_packed_sample_page_marks_document_starts(client: TestClient, inspector_catalog: Catalog) -> None:
    version = inspector_catalog.resolve("packed@v1")
    dom = soup(client.get(urls.sample("packed", version.id, "pack-0")))
    field = [f for f in dom.select("section.field") if f.select_one("h3").get_text() == "input_ids"][0]
    tokens = field.select(".tok-seq .tok")
    assert [i for i, t in enumerate(tokens) if "doc-start" in t["class"]] == [3]
    heat = [next((c for c in t["class"] if c.startswith("heat")), None) for t in tokens]
    assert heat == ["heat0", "heat3", "heat5", "heat7", None, "heat0"]  # loss 0.5 1.5 2.5 3.5 null 0.1
    assert field.select_one(".heat-legend").get_text(" ", strip=True).startswith("loss 0.1")
    assert "2 documents" in field.select_one(".tok-bar").get_text(" ", strip=True)


def chat_field(client: TestClient, catalog: Catalog, key: str):
    version = catalog.resolve("chat@v1")
    dom = soup(client.get(urls.sample("chat", version.id, key)))
    return [f for f in dom.select("section.field") if f.select_one("h3").get_text() == "messages"][0]


def test_a_good_chat_has_no_warnings(client: TestClient, inspector_catalog: Catalog) -> None:
    field = chat_field(client, inspector_catalog, "good")
    assert field.select(".badge.warn") == [] and field.select_one(".chat-broken") is None
    turns = field.select(".turn")
    assert [t["data-role"] for t in turns] == ["user", "assistant"]
    trained = [[tok.select_one(".p").get_text() for tok in t.select(".tok-seq .tok.trained")] for t in turns]
    assert trained == [[], ["two", "plus", "two", "is", "four", IM_END]]


def test_missing_end_of_turn_is_visibly_wrong(client: TestClient, inspector_catalog: Catalog) -> None:
    field = chat_field(client, inspector_catalog, "no-im-end")
    assert field.select_one(".chat.chat-broken") is not None
    broken = field.select(".turn.turn-broken")
    assert [t["data-role"] for t in broken] == ["assistant"]
    assert f"no {IM_END} closes this turn" in broken[0].select_one(".badge.warn").get_text()


def test_shifted_mask_is_visibly_wrong(client: TestClient, inspector_catalog: Catalog) -> None:
    field = chat_field(client, inspector_catalog, "shifted-mask")
    warnings = [w.get_text(" ", strip=True) for w in field.select(".badge.warn")]
    assert "⚠ loss mask is shifted by +1 token against the assistant spans" in warnings
    assert [t["data-role"] for t in field.select(".turn.turn-broken")] == ["assistant"]


def test_broken_values_render_an_inline_error_not_a_crash() -> None:
    ctx = FieldContext("input_ids", "tokens", {"input_ids": "oops"}, {"input_ids": "tokens"}, where="dataset d version v shard 0 row 3")
    view = render_field("oops", ctx)
    assert isinstance(view, ErrorView)
    assert view.message.startswith("dataset d version v shard 0 row 3 field 'input_ids' cannot be shown as tokens")


def test_every_kind_of_the_brief_has_a_renderer() -> None:
    assert {"text", "tokens", "chat", "json", "scalar", "binary", "mask", "labels", "*"} <= set(kinds_with_renderers())


_HIDDEN = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")


@given(st.text(alphabet=st.characters(codec="utf-8"), max_size=60), st.sampled_from([None, "a", "A b", "\x00"]))
def test_segments_keep_every_character_and_hide_none(text: str, highlight: str | None) -> None:
    segs, _ = segments(text, highlight=highlight)
    plain = [s for s in segs if s.kind != "ctl"]
    assert not any(_HIDDEN.search(s.text) for s in plain)
    assert sum(len(s.text) for s in plain) + sum(1 for s in segs if s.kind == "ctl") == len(text)
    assert all(s.title.startswith("U+") for s in segs if s.kind == "ctl")


@given(st.text(alphabet="ab \n", max_size=40), st.sampled_from(["a", "ab", "B"]))
def test_highlights_cover_exactly_the_matches(text: str, query: str) -> None:
    segs, count = segments(text, highlight=query)
    expected = [m.group() for m in re.finditer(re.escape(query), text, re.IGNORECASE)]
    assert count == len(expected)
    assert "".join(s.text for s in segs if s.mark) == "".join(expected)


def test_control_and_bidi_characters_become_visible_symbols() -> None:
    segs, _ = segments("a\x00b\u202ec\x1b")
    assert [(s.text, s.kind) for s in segs] == [("a", ""), ("␀", "ctl"), ("b", ""), ("⟨U+202E⟩", "ctl"), ("c", ""), ("␛", "ctl")]
    assert segs[3].title == "U+202E " + unicodedata.name("\u202e")


def test_deep_json_is_bounded_and_renders() -> None:
    value: object = "bottom"
    for _ in range(5000):
        value = [value]
    root, truncated = json_tree(value)
    assert truncated
    wide, cut = json_tree({f"k{i}": i for i in range(5000)})
    assert cut and wide.children[-1].label == "…" and len(wide.children) == 2001
    html = Templates().render("_partials/_json.html", {"view": JsonView(root=root, truncated=truncated)})
    assert "nested deeper than 64 levels" in html
