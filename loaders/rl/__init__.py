"""RL data in the read path: the facts of rollouts and episodes, their per-version indexes, and queries over rollout groups.

Modules, one concept each: ``facts`` (one rollout as read and what is
inconsistent in it), ``episodes`` (one episode likewise, and its frames),
``columns`` (which columns hold them; reading only their small sub-columns),
``query`` (``RolloutQuery`` and the numpy ``RolloutIndex`` that answers it),
``index`` and ``episode_index`` (the indexes a version gets in the catalog,
sealed derived files, see ``loaders.storage.derived``), ``confirm`` (an
index checked against the rows a page read) and ``store`` (where they live,
and the in-process memo of loaded ones).

>>> from loaders.rl import RolloutIndex, RolloutQuery, rollout_facts
>>> index = RolloutIndex.from_facts([rollout_facts({"reward": r, "group_id": "g"}) for r in (1.0, 1.0)])
>>> index.summary().zero_variance_groups
1
"""

from .columns import episode_column, rollout_column, rollout_columns
from .episode_index import episode_order, episode_table, episode_warnings
from .episodes import EpisodeFacts, episode_facts, episode_fields, episode_frame
from .facts import RolloutFacts, advantage_warning, facts_of, rollout_facts
from .index import available_index, use_dataset_groups, version_index
from .query import RolloutIndex, RolloutQuery, Summary

__all__ = [
    "EpisodeFacts",
    "RolloutFacts",
    "RolloutIndex",
    "RolloutQuery",
    "Summary",
    "advantage_warning",
    "available_index",
    "episode_column",
    "episode_facts",
    "episode_fields",
    "episode_frame",
    "episode_order",
    "episode_table",
    "episode_warnings",
    "facts_of",
    "rollout_column",
    "rollout_columns",
    "rollout_facts",
    "use_dataset_groups",
    "version_index",
]
