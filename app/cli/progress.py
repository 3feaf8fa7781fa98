"""The progress bar of long scans and imports on stderr: what is done, the rate, and the time left."""

from __future__ import annotations

import contextlib
from typing import Callable, Iterator, Optional

from rich.progress import (
    BarColumn,
    DownloadColumn,
    MofNCompleteColumn,
    Progress,
    TaskProgressColumn,
    TextColumn,
    TimeRemainingColumn,
    TransferSpeedColumn,
)

from .common import err_console

#: ``update(done, total)``: what a scan or an import reports as it advances (``total`` is None while unknown).
Update = Callable[[int, Optional[int]], None]


@contextlib.contextmanager
def progress_bar(label: str, unit: str) -> Iterator[Update]:
    """A rich progress bar on stderr (left on screen only while it runs), driven by ``update(done, total)``.

    ``unit`` is ``"bytes"`` (sizes and a transfer rate) or a word counted (``"rows"``, ``"files"``): the bar shows
    the count, its rate and the time left. Work done before the first update (the files a resumed scan already
    finished) counts toward the count, never toward the rate.
    """
    counter = DownloadColumn() if unit == "bytes" else MofNCompleteColumn()
    rate = TransferSpeedColumn() if unit == "bytes" else TextColumn("{task.fields[rate]}")
    with Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TaskProgressColumn(),
        counter,
        rate,
        TimeRemainingColumn(),
        console=err_console,
        transient=True,
    ) as bar:
        task = bar.add_task(label, total=None, rate="")
        started: list[bool] = []

        def update(done: int, total: Optional[int]) -> None:
            if not started:  # the first report: what was finished before (a resumed scan) is not a rate
                started.append(True)
                bar.reset(task, total=total, completed=done, rate="")
                return
            bar.update(task, completed=done, total=total)
            if unit != "bytes":
                speed = bar.tasks[task].speed
                bar.update(task, rate=f"{speed:,.0f} {unit}/s" if speed else "")

        yield update
