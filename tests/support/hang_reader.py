"""A rank that hangs: reads ``--steps`` batches of a run (marking each trained), says so, then blocks forever in its
main thread, as a rank stuck in a collective would. Its ledger tail must still reach the disk (flush timer).

Usage: hang_reader.py ROOT RUN --steps N
"""

from __future__ import annotations

import argparse
import threading

from loaders import Catalog


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("root")
    parser.add_argument("run")
    parser.add_argument("--steps", type=int, required=True)
    args = parser.parse_args()
    run = Catalog(args.root).run(args.run)
    reader = run.reader(0, 1)  # the default flush period (2 s)
    for batch in reader:
        reader.log(batch.step, loss=0.25)
        if batch.step == args.steps - 1:
            break
    print(f"handed out {args.steps}", flush=True)
    threading.Event().wait()  # hang: nothing more is appended, nothing is closed


if __name__ == "__main__":
    main()
