"""``privsdr reproduce NAME``: the papers' tables and figures."""
from __future__ import annotations

import argparse
import inspect
import time
from pathlib import Path
from typing import Any

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
    if args.secure_reps is not None and args.secure_reps < 0:
        raise ValueError(f"--secure-reps must be at least 0, got {args.secure_reps}")
    secure: dict[str, Any] = {} if args.secure_reps is None else {"secure_reps": args.secure_reps}
    if args.secure_only:
        secure["secure_only"] = True
    if secure and "secure_reps" not in inspect.signature(module.run).parameters:
        raise ValueError(f"{args.name} has no secure column (--secure-reps and --secure-only apply to dpbcd-table1/2/5 and "
                         "fsir-table1/2)")
    if args.secure_only and args.secure_reps == 0:
        raise ValueError("--secure-only with --secure-reps 0 has nothing to run")
    if args.secure_only and not (Path(args.out) / f"{args.name}.csv").exists():  # before minutes of secure fits
        raise ValueError(f"--secure-only adds the secure column to {Path(args.out) / f'{args.name}.csv'}, which does not "
                         "exist: run the table first")
    rows = module.run(args.name, reps=args.reps, seed=args.seed, **secure)
    if args.secure_only:
        rows = module.merge(rows, args.out)
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
    repro.add_argument("--secure-reps", type=int, default=None,
                       help="replications of the secure estimator's column (dpbcd-table*, fsir-table1/2; each fit starts MPyC "
                       "party processes on 127.0.0.1): the first N of each cell; 0: none (default: min(--reps, 20) for DP-BCD, "
                       "1 for FSIR)")
    repro.add_argument("--secure-only", action="store_true",
                       help="run only the secure column and put it into the table already in --out, whose other columns "
                       "(deterministic for a seed) are kept: run it with the --reps and --seed that table was written with")
    repro.add_argument("--seed", type=int, default=0, help="base seed (default 0)")
    repro.add_argument("--out", default="reproductions", help="output folder (default ./reproductions)")
    repro.set_defaults(func=_reproduce)

