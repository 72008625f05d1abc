"""``privsdr transform --model FILE --data CSV``: project new rows with a saved model (or predict, for a regression)."""
from __future__ import annotations

import argparse
import csv
import io

import numpy as np

from ..datasets import load_csv
from ..errors import ValidationError
from ..persistence import load_model
from ._common import FORMATTER, Outputs, distinct, input_file


def _transform(args: argparse.Namespace) -> int:
    with Outputs() as outputs:
        out = outputs.add(args.out, "--out", (".csv",))
        model_path, data = input_file(args.model, "--model"), input_file(args.data, "--data")
        distinct([("--model", model_path), ("--data", data), ("--out", out)])
        est = load_model(model_path)
        if not hasattr(est, "transform") and not hasattr(est, "predict"):
            raise ValidationError(f"{args.model} holds a {type(est).__name__}, which has no transform (nothing to project on)")
        meta = getattr(est, "model_metadata_", {}) or {}
        columns = args.columns or meta.get("columns")
        if not columns:
            raise ValidationError(f"{args.model} does not record its feature columns; give them with --columns")
        X, _, names = load_csv(data, columns=columns)
        if hasattr(est, "transform"):
            Z, what = np.asarray(est.transform(X)), "projections"
            header = [f"direction_{k + 1}" for k in range(Z.shape[1])]
        else:  # a regression: its predictions
            Z, what, header = np.asarray(est.predict(X), dtype=float).reshape(-1, 1), "predictions", ["prediction"]
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(header)
        writer.writerows([[repr(float(v)) for v in row] for row in Z])
        if out is None:
            print(buffer.getvalue(), end="")
        else:
            outputs.commit("--out", buffer.getvalue())
            print(f"wrote {Z.shape[0]} rows x {Z.shape[1]} {what} to {out} (model {type(est).__name__}, digest {est.model_digest_})")
    return 0


def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    tr = sub.add_parser("transform", formatter_class=FORMATTER, help="project new rows (or predict) with a model saved by `fit --out`",
                        description="Read a model file written by `privsdr fit ... --out MODEL.json` (its digest is checked "
                        "against the one its privacy report records), read the same feature columns from a CSV, clip them "
                        "to the model's public bounds and project them on its directions (a regression model, `fit pls`, "
                        "writes its predictions instead). Spends no budget: the model is already a DP release.")
    tr.add_argument("--model", required=True, help="model file written by `privsdr fit --out`")
    tr.add_argument("--data", required=True, help="CSV with (at least) the model's feature columns")
    tr.add_argument("--columns", nargs="+", default=None, help="feature columns (default: those the model records)")
    tr.add_argument("--out", default=None, metavar="OUT.csv", help="write the projections (or predictions) here (default: print them)")
    tr.set_defaults(func=_transform)
