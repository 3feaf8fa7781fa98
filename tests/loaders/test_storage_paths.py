"""Local paths are normalized exactly as pathlib makes them absolute, also on the fast path for clean absolute paths."""

from __future__ import annotations

from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from loaders.storage.files import normalize

SEGMENTS = st.sampled_from(["a", "b.c", ".", "..", "", ".x", "x.", "~", "d e", "é"])


@given(parts=st.lists(SEGMENTS, max_size=6), leading=st.sampled_from(["/", "//", "///", ""]), trailing=st.booleans())
def test_normalize_is_pathlibs_absolute_form(parts: list[str], leading: str, trailing: bool) -> None:
    text = leading + "/".join(parts) + ("/" if trailing else "")
    if not text:
        return
    assert normalize(text) == str(Path(text).expanduser().absolute())
