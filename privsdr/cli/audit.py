"""``privsdr audit MECHANISM``: empirical DP audit of a registered mechanism."""
from __future__ import annotations

import argparse
import json

from ..errors import ValidationError
from ..mechanisms import available_mechanisms
from ._common import EXIT_FAILED, FORMATTER, finite_float, positive_int

#: mechanisms with a generic sampler (an opaque mechanism is audited through the algorithm that defines it)
AUDITABLE = tuple(m for m in available_mechanisms() if m != "opaque")


def _audit(args: argparse.Namespace) -> int:
    from ..audit import audit_mechanism

    if not 0 < args.alpha < 1:
        raise ValidationError(f"--alpha must be in (0, 1), got {args.alpha:g}")
    if not args.epsilon > 0:
        raise ValidationError(f"--epsilon must be positive, got {args.epsilon:g}")
    if not 0 <= args.delta < 1:
        raise ValidationError(f"--delta must be in [0, 1), got {args.delta:g}")

    result = audit_mechanism(
        args.mechanism, epsilon=args.epsilon, delta=args.delta, calibration=args.calibration,
        noise_scale=args.noise_scale, samples=args.samples, alpha=args.alpha, seed=args.seed,
    )
    if args.json:
        print(json.dumps({"mechanism": args.mechanism, "noise_scale": args.noise_scale, **result.to_dict()}))
    else:
        print(f"{args.mechanism} at (epsilon={args.epsilon:g}, delta={args.delta:g}), noise x{args.noise_scale:g}")
        print(result.summary())
    return 0 if result.passed else EXIT_FAILED



def add_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    audit = sub.add_parser("audit", formatter_class=FORMATTER,
                           help="empirically audit a registered mechanism: a lower confidence bound on its epsilon",
                           description="Sample MECHANISM on its worst-case neighbouring pair, count a pre-registered threshold "
                           "test, and print a lower confidence bound on epsilon with the counts behind it. Exit code 1 when "
                           "the claimed guarantee is rejected. --noise-scale F < 1 draws less noise than calibrated: watch "
                           "the audit fail.")
    audit.add_argument("mechanism", choices=AUDITABLE, help="registered mechanism name")
    audit.add_argument("--epsilon", type=finite_float, default=1.0, help="claimed epsilon (default 1.0)")
    audit.add_argument("--delta", type=finite_float, default=1e-5, help="claimed delta (default 1e-5; ignored by pure mechanisms)")
    audit.add_argument("--samples", type=positive_int, default=None, help="samples per side (default: enough to certify 0.8 at epsilon 1)")
    audit.add_argument("--noise-scale", type=finite_float, default=1.0, help="multiply the calibrated noise by F (F < 1 is a bug)")
    audit.add_argument("--calibration", default=None, help="noise calibration (mechanism default if omitted)")
    audit.add_argument("--alpha", type=finite_float, default=1e-3, help="1 - confidence, in (0, 1) (default 1e-3)")
    audit.add_argument("--seed", type=int, default=0, help="seed of the audit's own sampling (default 0)")
    audit.add_argument("--json", action="store_true", help="print one JSON object")
    audit.set_defaults(func=_audit)
