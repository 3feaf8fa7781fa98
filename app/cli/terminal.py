"""How ``batchscope show`` writes samples in a terminal or a pipe: tokens, media summaries, rollout turns.

In a terminal, styles carry meaning (alternating token colours, dimmed masked
tokens). In a pipe they are gone, so the plain form spells it out: tokens are
separated by ``¦`` (a broken bar: ``|`` is part of tokens such as
``<|im_start|>``), masked runs are wrapped in ``‹…›``, padding is one
``[N padding tokens]`` run, and diffs mark ``[-deleted-]{+inserted+}``.
Data is shown as the web pages show it (``app.reveal``): a control character,
an escape sequence or a bidi override is a visible stand-in, never sent to the
terminal raw.

>>> token_text([1, 2, 3, 0], [0, 1, 1, 0], [], None, padding=1, plain=True).plain
'‹1›¦2¦3¦[1 padding token]'
"""

from __future__ import annotations

import io
import json
from typing import Any, Mapping, Sequence

import numpy as np
from rich.text import Text

from ..reveal import visible, visible_piece, visible_text

_SHADES = ("cyan", "magenta")
#: Token boundary in plain output.
BOUNDARY = "¦"


def token_text(
    ids: Sequence[int],
    mask: Sequence[Any] | None,
    spans: Sequence[Mapping[str, Any]],
    tokenizer: Any,
    *,
    padding: int = 0,
    plain: bool = False,
) -> Text:
    """Token boundaries (colours, or ``¦`` when ``plain``), masked tokens dimmed (or ``‹…›``), document starts ``▌key``,
    and trailing padding as one run."""
    padding = min(max(0, padding), len(ids))
    content = len(ids) - padding
    starts = {int(s["start"]): s for s in spans}
    text = Text()
    for i in range(content):
        token = ids[i]
        masked, before = _masked(mask, i), i > 0 and _masked(mask, i - 1)
        if plain and i:
            text.append("›" + BOUNDARY if before and not masked else BOUNDARY)
        if i in starts and (i > 0 or starts[i].get("offset", 0) == 0):
            text.append(f"▌{visible(starts[i].get('key', ''))} ", style="bold yellow")
        if plain and masked and not before:
            text.append("‹")
        piece = tokenizer.decode([token], skip_special_tokens=False) if tokenizer is not None else str(token)
        piece = visible_piece(piece or f"<{token}>")
        if plain:
            text.append(piece)
        else:
            text.append(piece if tokenizer is not None else piece + " ", style=("dim " if masked else "") + _SHADES[i % 2])
    if plain and content and _masked(mask, content - 1):
        text.append("›")
    if padding:
        noun = "padding token" if padding == 1 else "padding tokens"
        text.append((BOUNDARY if plain and content else " " if content else "") + f"[{padding} {noun}]", style="dim italic")
    return text


def _masked(mask: Sequence[Any] | None, i: int) -> bool:
    return mask is not None and i < len(mask) and not mask[i]


def _size(data: bytes) -> str:
    return f"{len(data):,} bytes"


def _image_dimensions(data: bytes) -> str | None:
    """``WIDTH×HEIGHT FORMAT`` of encoded image bytes (the header only), or ``None`` when it cannot be read."""
    try:
        from PIL import Image

        with Image.open(io.BytesIO(data)) as image:
            return f"{image.width}×{image.height} {image.format or ''}".strip()
    except Exception:  # not an image PIL knows: the size still says enough
        return None


def _stored_bytes(value: Any) -> tuple[bytes | None, str | None]:
    """Bytes and path of a media value: raw bytes, or the ``{bytes, path}`` struct Hugging Face writes."""
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value), None
    if isinstance(value, Mapping):
        data = value.get("bytes")
        return (bytes(data) if isinstance(data, (bytes, bytearray, memoryview)) else None), value.get("path")
    return None, None


def media_line(name: str, value: Any, kind: str) -> str:
    """One line for a stored image, video or binary field: kind, size and dimensions (its URL goes on the next line).

    >>> media_line("blob", b"\\x00" * 10, "binary")
    'blob: binary, 10 bytes'
    """
    data, path = _stored_bytes(value)
    parts = [kind]
    if data is not None:
        parts.append(_size(data))
        if kind == "image":
            parts.append(_image_dimensions(data) or "unreadable image")
    if path:
        parts.append(f"path {visible(path)}")
    if data is None and not path:
        parts.append("no bytes")
    return f"{name}: {', '.join(parts)}"


def model_media_line(name: str, value: Any, inputs: Mapping[str, Any]) -> str:
    """One line for pixels a transform made: a crop (with its box) or sampled frames (with their indices and times)."""
    array = np.asarray(value)
    shape = "×".join(str(n) for n in array.shape)
    if name == "frames":
        indices = ", ".join(str(int(i)) for i in inputs.get("frame_indices", []))
        times = list(inputs.get("frame_times", []))
        span = f" at {float(times[0]):.2f}–{float(times[-1]):.2f} s" if times else ""
        return f"{name}: {len(array)} video frames {shape} {array.dtype}, frame indices {indices}{span}"
    box = inputs.get("crop_box")
    source = inputs.get("source_size")
    crop = f", crop box {list(box)} of {source[0]}×{source[1]}" if box is not None and source is not None else ""
    return f"{name}: image {shape} {array.dtype}{crop}"


def rollout_lines(value: Any) -> list[Text]:
    """A rollout as a header (reward, advantage, group, finish, tokens) and its turns, ``role: content`` each."""
    from loaders.rl.facts import number_text, rollout_facts

    facts = rollout_facts(value)
    header = [f"reward {number_text(facts.reward)}", f"advantage {number_text(facts.advantage)}"]
    if facts.group_id is not None:
        header.append(f"group {visible(facts.group_id)}")
    if facts.finish_reason:
        header.append(f"finish {visible(facts.finish_reason)}")
    if facts.length is not None:
        header.append(f"{facts.length:,} completion tokens")
    lines = [Text("rollout: " + " · ".join(header), style="bold")]
    turns = facts.turns or [{"role": "user", "content": facts.prompt}, {"role": "assistant", "content": facts.completion}]
    for turn in turns:
        role = str(turn.get("role", "?")) if isinstance(turn, Mapping) else "?"
        content = turn.get("content", "") if isinstance(turn, Mapping) else turn
        body = content if isinstance(content, str) else json.dumps(content, ensure_ascii=False, default=str)
        line = Text(f"  {visible(role)}: ", style="bold cyan" if role == "assistant" else "bold")
        line.append(visible_text(body))
        lines.append(line)
    lines += [Text(f"  warning: {w}", style="yellow") for w in facts.warnings]
    return lines


def change(text: Text, old: str, new: str, *, plain: bool, arrow: bool = False) -> None:
    """Append a replacement to ``text``: struck red and underlined green in a terminal, ``[-old-]{+new+}`` in a pipe.

    Either side may be empty (a pure insertion or deletion); ``arrow`` puts `` → `` between the sides in a terminal.
    Hidden characters of either side are revealed (``app.reveal.visible_text``).

    >>> t = Text(); change(t, "cat", "dog", plain=True); t.plain
    '[-cat-]{+dog+}'
    """
    old, new = visible_text(old), visible_text(new)
    if plain:
        text.append((f"[-{old}-]" if old else "") + (f"{{+{new}+}}" if new else ""))
        return
    if old:
        text.append(old, style="red" if arrow else "red strike")
    if arrow:
        text.append(" → ")
    if new:
        text.append(new, style="green" if arrow else "green underline")
