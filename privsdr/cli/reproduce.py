"""``privsdr reproduce NAME``: the papers' tables and figures."""
from __future__ import annotations

import argparse
import time

from ._common import FORMATTER, check_output_dir, positive_int


def _reproduce(args: argparse.Namespace) -> int:
    from ..reproduce import REPRODUCTIONS

    if args.list or not args.name:
        width = max(map(len, REPRODUCTIONS))  # the titles start in one column, however long the names
        for name, (_, title) in REPRODUCTIONS.items():
            print(f"{name:<{width}}  {title}")
        return 0
    if args.name not in REPRODUCTIONS:
        raise ValueError(f"unknown reproduction {args.name!r}; see privsdr reproduce --list")
    module, _ = REPRODUCTIONS[args.name]
    check_output_dir(args.out, "--out")  # before minutes of work
    start = time.perf_counter()
    rows = module.run(args.name, reps=args.reps, seed=args.seed)
    for row in rows:
        row.setdefault("seconds_total", round(time.perf_counter() - start, 2))
    csv_path, md_path = module.write(rows, args.out)
    print(md_path.read_text())
    seconds = rows[0].get("seconds_total")
    print(f"wrote {csv_path} and {md_path}" + (f" ({seconds} s)" if seconds is not None else ""))
    return 0



def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    repro = sub.add_parser("reproduce", formatter_class=FORMATTER, help="reproduce a paper's table (--list shows them)",
                           description="Run a paper's simulation grid and write a CSV and a Markdown table with our medians "
                           "beside the paper's. The paper used 1000 replications; the default here is small enough for minutes.")
    repro.add_argument("name", nargs="?", default=None, help="e.g. dpsir-table1")
    repro.add_argument("--list", action="store_true", help="list the available reproductions")
    repro.add_argument("--reps", type=positive_int, default=3, help="replications per cell (default 3; the paper: 1000)")
    repro.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    repro.add_argument("--out", default="reproductions", help="output folder (default ./reproductions)")
    repro.set_defaults(func=_reproduce)

