"""The demo's ``episodes`` dataset: gridworld episodes with rendered frames, actions, rewards and done flags."""

from __future__ import annotations

import io
from collections import deque
from dataclasses import dataclass

import numpy as np
import pyarrow as pa
from PIL import Image, ImageDraw

from loaders import Catalog
from loaders.media.framecode import draw_frame_code

from .common import DemoChanges, register_pair

NAME = "episodes"
EPISODES = 40
ADDED = 4
ROWS, COLS = 7, 8  # cells, the border included
CELL = 8  # pixels per cell: frames are 64 x 56 px of grid plus an 8 px frame-code band, 64 x 64 in all
FRAME_CODE_BITS = 8
MAX_STEPS = 40
STEP_PENALTY = -0.01
GOAL_BONUS = 1.0
#: Actions: index -> (name, row delta, column delta).
ACTIONS = (("up", -1, 0), ("right", 0, 1), ("down", 1, 0), ("left", 0, -1))
EPISODE = pa.struct(
    [
        ("frames", pa.list_(pa.binary())),
        ("actions", pa.list_(pa.int32())),
        ("rewards", pa.list_(pa.float32())),
        ("dones", pa.list_(pa.bool_())),
    ]
)
SCHEMA = pa.schema(
    [
        ("id", pa.string()),
        ("env", pa.string()),
        ("episode", EPISODE),
        ("length", pa.int32()),
        ("return", pa.float32()),
        ("termination", pa.string()),
    ]
)
#: Inner walls of each environment, as (row, column) cells; the border is always wall.
ENVS: dict[str, frozenset[tuple[int, int]]] = {
    "gridworld-open-v0": frozenset(),
    "gridworld-walls-v0": frozenset({(2, 2), (2, 3), (2, 4), (4, 3), (4, 4), (4, 5)}),
}
_WALL, _FLOOR, _AGENT, _GOAL = (70, 70, 90), (225, 225, 215), (40, 90, 230), (40, 180, 70)


@dataclass(frozen=True)
class _Episode:
    number: int
    env: str
    positions: list[tuple[int, int]]  # agent position before each action, then the final one
    goal: tuple[int, int]
    actions: list[int]
    reached: bool

    @property
    def key(self) -> str:
        return f"ep-{self.number:03d}"


def _walls(env: str) -> set[tuple[int, int]]:
    border = {(r, c) for r in range(ROWS) for c in range(COLS) if r in (0, ROWS - 1) or c in (0, COLS - 1)}
    return border | set(ENVS[env])


def _distances(goal: tuple[int, int], walls: set[tuple[int, int]]) -> dict[tuple[int, int], int]:
    """Shortest number of steps from every free cell to the goal (BFS)."""
    distance = {goal: 0}
    queue = deque([goal])
    while queue:
        row, col = queue.popleft()
        for _, dr, dc in ACTIONS:
            cell = (row + dr, col + dc)
            if cell not in walls and cell not in distance:
                distance[cell] = distance[(row, col)] + 1
                queue.append(cell)
    return distance


def _simulate(number: int, seed: int) -> _Episode:
    """An epsilon-greedy agent walking to the goal; it times out after ``MAX_STEPS`` steps."""
    rng = np.random.default_rng([seed, number])
    env = list(ENVS)[number % len(ENVS)]
    walls = _walls(env)
    free = sorted((r, c) for r in range(ROWS) for c in range(COLS) if (r, c) not in walls)
    goal = free[int(rng.integers(len(free)))]
    distance = _distances(goal, walls)
    far = [cell for cell in free if distance.get(cell, 0) >= 4]
    start = far[int(rng.integers(len(far)))]
    epsilon = float(rng.choice([0.1, 0.3, 0.6, 0.9, 0.98]))
    position, positions, actions = start, [start], []
    while position != goal and len(actions) < MAX_STEPS:
        if rng.random() < epsilon:
            action = int(rng.integers(len(ACTIONS)))
        else:
            moves = [
                a
                for a, (_, dr, dc) in enumerate(ACTIONS)
                if distance.get((position[0] + dr, position[1] + dc), 1 << 30) < distance[position]
            ]
            action = int(rng.choice(moves))
        _, dr, dc = ACTIONS[action]
        target = (position[0] + dr, position[1] + dc)
        position = position if target in walls else target
        actions.append(action)
        positions.append(position)
    return _Episode(number, env, positions, goal, actions, reached=position == goal)


def render(env: str, agent: tuple[int, int], goal: tuple[int, int], step: int) -> bytes:
    """One 64 x 64 PNG observation: walls, goal, agent, and ``step`` as a frame code along the bottom."""
    walls = _walls(env)
    img = Image.new("RGB", (COLS * CELL, ROWS * CELL + CELL), _FLOOR)
    draw = ImageDraw.Draw(img)
    for row in range(ROWS):
        for col in range(COLS):
            if (row, col) in walls:
                draw.rectangle((col * CELL, row * CELL, col * CELL + CELL - 1, row * CELL + CELL - 1), fill=_WALL)
    row, col = goal
    draw.rectangle((col * CELL + 1, row * CELL + 1, col * CELL + CELL - 2, row * CELL + CELL - 2), fill=_GOAL)
    row, col = agent
    draw.ellipse((col * CELL + 1, row * CELL + 1, col * CELL + CELL - 2, row * CELL + CELL - 2), fill=_AGENT)
    draw_frame_code(img, step, bits=FRAME_CODE_BITS, number=False)
    buffer = io.BytesIO()
    img.save(buffer, format="PNG", optimize=False, compress_level=6)
    return buffer.getvalue()


def _rewards(episode: _Episode, *, goal_bonus: bool) -> list[float]:
    rewards = [STEP_PENALTY] * len(episode.actions)
    if episode.reached and goal_bonus:
        rewards[-1] += GOAL_BONUS
    return rewards


def _row(episode: _Episode, *, goal_bonus: bool = True) -> dict[str, object]:
    """Frames hold the observation *before* each action, so every list has ``length`` entries."""
    length = len(episode.actions)
    rewards = _rewards(episode, goal_bonus=goal_bonus)
    return {
        "id": episode.key,
        "env": episode.env,
        "episode": {
            "frames": [render(episode.env, episode.positions[t], episode.goal, t) for t in range(length)],
            "actions": episode.actions,
            "rewards": rewards,
            "dones": [t == length - 1 for t in range(length)],
        },
        "length": length,
        "return": float(np.sum(np.asarray(rewards, dtype=np.float32), dtype=np.float32)),
        "termination": "goal" if episode.reached else "timeout",
    }


def build(catalog: Catalog, *, seed: int) -> None:
    """Register ``episodes`` v1 and v2.

    v1 has a reward bug: three episodes that reached the goal lack the goal
    bonus; v2 fixes their rewards and returns (edited), drops three episodes
    and adds four.
    """
    rng = np.random.default_rng(seed)
    episodes = {n: _simulate(n, seed) for n in range(EPISODES + ADDED)}
    reached = [n for n in range(EPISODES) if episodes[n].reached]
    bugged = {int(n) for n in rng.choice(reached, size=3, replace=False)}
    removed = {int(n) for n in rng.choice([n for n in range(EPISODES) if n not in bugged], size=3, replace=False)}
    rows = {n: _row(episodes[n]) for n in range(EPISODES + ADDED)}
    v1_rows = [_row(episodes[n], goal_bonus=False) if n in bugged else rows[n] for n in range(EPISODES)]
    v2_rows = [rows[n] for n in range(EPISODES + ADDED) if n not in removed]
    changes = DemoChanges.between(
        v1_rows,
        v2_rows,
        notes={
            "reward": f"{STEP_PENALTY} per step, plus {GOAL_BONUS} on the step that reaches the goal",
            "reward_fix": {episodes[n].key: "v1 lacks the goal bonus on the last step" for n in sorted(bugged)},
            "actions": [name for name, _, _ in ACTIONS],
            "frames": "frames[t] is the observation before actions[t]; each shows t as an 8-bit frame code",
            "max_steps": MAX_STEPS,
        },
    )
    register_pair(
        catalog,
        NAME,
        pa.Table.from_pylist(v1_rows, schema=SCHEMA),
        pa.Table.from_pylist(v2_rows, schema=SCHEMA),
        changes,
        key="id",
        rows_per_shard=20,
        row_group_size=8,
    )
