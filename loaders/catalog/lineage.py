"""A version's recorded parent, believed only when its chain of parents is sound.

``parent`` is recorded in a manifest at registration (the dataset's head at
the time) and is not part of the version id, so an edit can point it anywhere.
Pages show it as unverified, and only when following parents from the version
reaches a root through versions of the same dataset: a chain that returns to a
version it passed (``v1 → v2 → v1``) or names a version the dataset does not
have is refused, with the reason, and no parent is shown.

>>> checked_parent("a", {"a": "b", "b": None})
('b', None)
>>> checked_parent("a", {"a": "b", "b": "a"})
(None, 'its parent chain a → b → a returns to a version it passed: refused')
>>> checked_parent("a", {"a": "c"})
(None, 'its parent chain a → c reaches c, which is not a readable version of this dataset: refused')
"""

from __future__ import annotations

from typing import Callable, Mapping


def checked_parent(version_id: str, parents: Mapping[str, str | None] | Callable[[str], str | None]) -> tuple[str | None, str | None]:
    """``(parent, None)`` when following parents from ``version_id`` ends at a root, else ``(None, reason)``.

    ``parents`` maps (or is a function from) a version id to its recorded parent; a missing id raises KeyError in the
    function form and is absent from the mapping.
    """
    look = parents.__getitem__ if isinstance(parents, Mapping) else parents
    chain = [version_id]
    seen = {version_id}
    current = look(version_id)
    while current is not None:
        chain.append(current)
        if current in seen:
            shown = " → ".join(c[:12] for c in chain)
            return None, f"its parent chain {shown} returns to a version it passed: refused"
        seen.add(current)
        try:
            current = look(current)
        except KeyError:
            shown = " → ".join(c[:12] for c in chain)
            return None, f"its parent chain {shown} reaches {chain[-1][:12]}, which is not a readable version of this dataset: refused"
    return (chain[1] if len(chain) > 1 else None), None
