"""The public description of one secure aggregation, and the size of the field it needs.

A job lists the releases (nodes) summed in one secure computation, each with its grid step gamma, the variance of
each party's noise share (an exact rational) and a public bound on one party's statistic; the parties in MPyC's
order; which of them contribute a statistic and a share; the collusion threshold t. Everything in it is public:
it is written to a file every party reads, and it is what the trust-model section of the report describes.

Field size (no sum can wrap around). A contributing party sends, per coordinate, q + e with
|q| <= ceil(B / gamma) + 1 (its statistic is clipped to |x| <= B before rounding) and |e| <= 40 sigma_local
(a party whose own share exceeds that refuses to send it: probability below exp(-800), and a refusal decided by
the noise alone reveals nothing about the data). The opened sum over the k contributors is then bounded by
S = k (ceil(B / gamma) + 1 + 40 sigma_local), and the secure integers get ``bits`` = ceil(log2(S + 1)) + 1 bits
(sign included), at most 62 so that the parties' vectors and the opened sum are exact int64 arrays. MPyC's
SecInt(bits) works in a prime field of more than 2^(bits + 30) elements, so a sum within +-2^(bits - 1) is
decoded exactly.

Agreement (issue 33): ``digest()`` is the sha256 of a canonical serialisation of every field of the job, nested
records included (``canonical``: built from the attrs fields themselves, so a field added later is covered without
an edit), and ``public`` carries the calibrated plan's public record (budget, accountant, relation, sensitivities,
noise events: ``aggregate.public_record``). Every party checks, over MPyC's channels, that all parties hold the same
digest before anything is charged (``party``).
"""
from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from fractions import Fraction
from typing import Any

import attrs

from ..errors import ValidationError
from ..mechanisms.collusion import honest_majority
from ..network.addresses import check_addresses, is_loopback
from .crossproducts import CrossProducts

#: a party's noise share beyond this many standard deviations is refused by the party itself
SHARE_TAIL = 40
#: the largest bit length: the parties' vectors and the opened sum stay exact int64 arrays
MAX_BITS = 62


def _names(value: Any) -> tuple[str, ...]:
    return tuple(str(v) for v in value)


def _nodes(value: Any) -> tuple[NodeJob, ...]:
    return tuple(value)


def canonical(value: Any) -> Any:
    """``value`` as plain JSON types, the same in every process: attrs records field by field (every field, by
    construction), mappings with string keys, sequences as lists; anything else is refused rather than guessed."""
    if attrs.has(type(value)):
        return {f.name: canonical(getattr(value, f.name)) for f in attrs.fields(type(value))}
    if isinstance(value, Mapping):
        return {str(k): canonical(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [canonical(v) for v in value]
    if isinstance(value, Fraction):
        return [value.numerator, value.denominator]
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else repr(value)  # repr: exact, and the same in every process
    if hasattr(value, "item"):  # a numpy scalar
        return canonical(value.item())
    raise TypeError(f"the job's digest cannot serialise a {type(value).__name__} canonically")


def _public(value: Any) -> str:
    """The public record as canonical JSON text (a frozen, hashable field)."""
    if isinstance(value, str):
        value = json.loads(value) if value else {}
    return json.dumps(canonical(value or {}), sort_keys=True, separators=(",", ":"))


@attrs.frozen
class NodeJob:
    """One release of the aggregation: ``dimension`` numbers on the grid ``gamma`` (a power of two), each party's
    noise share N_Z(0, ``sigma_local2``) (numerator, denominator; (0, 1): noise off), and ``bound``: a public bound
    on every coordinate of one party's statistic (real units). ``square``: p when the node is a symmetric p x p
    matrix carried by its upper triangle."""

    name: str
    dimension: int
    gamma: float
    sigma_local2: tuple[int, int]
    bound: float
    square: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.dimension < 1 or not (self.gamma > 0 and math.isfinite(self.gamma)) or not (self.bound >= 0 and math.isfinite(self.bound)):
            raise ValidationError(f"node {self.name!r}: need dimension >= 1, a positive grid and a finite bound")
        if self.sigma_local2[0] < 0 or self.sigma_local2[1] <= 0:
            raise ValidationError(f"node {self.name!r}: the share variance must be a non-negative fraction")
        if self.square is not None and self.square * (self.square + 1) // 2 != self.dimension:
            raise ValidationError(f"node {self.name!r}: a {self.square} x {self.square} matrix carries {self.square * (self.square + 1) // 2} numbers")

    @property
    def variance(self) -> Fraction:
        return Fraction(*self.sigma_local2)

    @property
    def grid_bound(self) -> int:
        """|q| <= ceil(bound / gamma) + 1 for a clipped, rounded coordinate."""
        return math.ceil(self.bound / self.gamma) + 1

    @property
    def share_bound(self) -> int:
        """|e| of one party's share is refused beyond ``SHARE_TAIL`` standard deviations."""
        return math.ceil(SHARE_TAIL * math.sqrt(float(self.variance)))


@attrs.frozen
class AggregationJob:
    """Every public choice of one secure aggregation (module docstring). ``parties``: MPyC's order (index i runs
    as party i); ``inputs``: those that contribute a statistic and a noise share; ``threshold``: t, both MPyC's
    Shamir threshold (any t parties together see only uniformly random shares) and the number of colluders whose
    shares the calibration does without; ``timeout``: seconds a party waits for the others."""

    parties: tuple[str, ...] = attrs.field(converter=_names)
    inputs: tuple[str, ...] = attrs.field(converter=_names)
    threshold: int
    nodes: tuple[NodeJob, ...] = attrs.field(converter=_nodes)
    timeout: float = 60.0
    products: CrossProducts | None = None  #: a secure Gram of vertically partitioned columns (``crossproducts``)
    #: the calibrated plan's public record (``aggregate.public_record``), canonical JSON: in the digest
    public: str = attrs.field(default="", converter=_public)
    #: one ``host:port`` per party, in order: party i listens on its own and dials the others (``addresses``); empty:
    #: the launcher picks free ports on 127.0.0.1 (``with_addresses``)
    addresses: tuple[str, ...] = attrs.field(default=(), converter=_names)
    #: mutual TLS between the parties (MPyC's --ssl, certificates of one CA, names checked both ways); False only
    #: when plaintext was asked for explicitly
    tls: bool = True

    def __attrs_post_init__(self) -> None:
        m = len(self.parties)
        if len(set(self.parties)) != m or m < 3:
            raise ValidationError(f"secure aggregation needs at least 3 distinct parties (an honest majority among them), got {list(self.parties)}")
        if not set(self.inputs) <= set(self.parties) or not self.inputs or len(set(self.inputs)) != len(self.inputs):
            raise ValidationError(f"the contributing parties {list(self.inputs)} must be distinct parties of {list(self.parties)}")
        if isinstance(self.threshold, bool) or not isinstance(self.threshold, int) or not honest_majority(m, self.threshold):
            raise ValidationError(f"the collusion threshold t must satisfy 1 <= t < m/2 = {m / 2:g} (honest majority), got {self.threshold!r}")
        if not self.nodes or len({n.name for n in self.nodes}) != len(self.nodes):
            raise ValidationError("a job needs at least one node, with distinct names")
        if not (self.timeout > 0 and math.isfinite(self.timeout)):
            raise ValidationError(f"timeout must be a positive number of seconds, got {self.timeout!r}")
        if self.products is not None:
            if not set(self.products.parties) <= set(self.parties):
                raise ValidationError(f"the data parties {list(self.products.parties)} must be parties of {list(self.parties)}")
            dims = self.products.dimensions
            if [(n.name, n.dimension) for n in self.nodes] != list(dims.items()):
                raise ValidationError(f"a secure Gram releases the nodes {dims} in this order")
        if self.addresses:
            check_addresses(self.addresses, self.parties)
        if not isinstance(self.tls, bool):
            raise ValidationError(f"tls must be True or False, got {self.tls!r}")
        field_bits(self)  # refuses a grid too fine for the field before any party starts

    @property
    def dimension(self) -> int:
        return sum(n.dimension for n in self.nodes)

    @property
    def bits(self) -> int:
        return field_bits(self)

    def index(self, party: str) -> int:
        return self.parties.index(party)

    @property
    def loopback(self) -> bool:
        """Whether every party's address is on this machine's loopback interface."""
        return all(is_loopback(a) for a in self.addresses)

    def with_addresses(self) -> AggregationJob:
        """This job, with free ports on 127.0.0.1 when it names no addresses (the single-machine default)."""
        from ..network.addresses import loopback_addresses

        return self if self.addresses else attrs.evolve(self, addresses=loopback_addresses(len(self.parties)))

    def record(self) -> str:
        """The canonical serialisation of the whole job: every field (``canonical``) and the field size."""
        return json.dumps({**canonical(self), "bits": self.bits}, sort_keys=True, separators=(",", ":"))

    def digest(self) -> str:
        """sha256 of ``record()``: what the parties compare before anything is charged."""
        return hashlib.sha256(self.record().encode()).hexdigest()

    def to_dict(self) -> dict[str, Any]:
        return {"parties": list(self.parties), "inputs": list(self.inputs), "threshold": self.threshold, "timeout": self.timeout,
                "nodes": [{**attrs.asdict(n), "sigma_local2": list(n.sigma_local2)} for n in self.nodes], "bits": self.bits,
                "products": None if self.products is None else self.products.to_dict(), "public": json.loads(self.public),
                "addresses": list(self.addresses), "tls": self.tls}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=1)

    @classmethod
    def from_json(cls, text: str) -> AggregationJob:
        data = json.loads(text)
        nodes = tuple(NodeJob(**{**n, "sigma_local2": tuple(n["sigma_local2"])}) for n in data["nodes"])
        products = None if data.get("products") is None else CrossProducts.from_dict(data["products"])
        job = cls(data["parties"], data["inputs"], int(data["threshold"]), nodes, float(data["timeout"]), products,
                  data.get("public") or {}, data.get("addresses") or (), data.get("tls", True))  # no "tls": never plaintext
        if job.bits != data.get("bits", job.bits):
            raise ValidationError("the job's field size does not follow from its nodes")
        return job


def differences(mine: str, theirs: str) -> list[str]:
    """Which parts of two jobs' ``record()`` differ (``public.budget``, ``nodes``, ...), for a party's message."""
    try:
        a, b = json.loads(mine), json.loads(theirs)
        a["public"], b["public"] = json.loads(a.get("public") or "{}"), json.loads(b.get("public") or "{}")
    except (TypeError, ValueError, AttributeError):
        return ["(unreadable)"]
    if not isinstance(a, dict) or not isinstance(b, dict):
        return ["(unreadable)"]
    paths = []
    for key in sorted(set(a) | set(b)):
        x, y = a.get(key), b.get(key)
        if x != y:
            if isinstance(x, dict) and isinstance(y, dict):
                paths += [f"{key}.{k}" for k in sorted(set(x) | set(y)) if x.get(k) != y.get(k)]
            else:
                paths.append(str(key))
    return paths


def field_bits(job: AggregationJob) -> int:
    """The bit length of the secure integers: the opened sum of every contributor's q + e fits (module docstring)."""
    k = len(job.inputs)
    worst = max(k * (n.grid_bound + n.share_bound) for n in job.nodes)
    bits = int(worst).bit_length() + 1  # exact: ceil(log2(worst + 1)) + 1 without float rounding
    if bits > MAX_BITS:
        raise ValidationError(f"the secure sum needs {bits} bits (> {MAX_BITS}): the grid is too fine for the public bounds "
                              "(a looser sensitivity or tighter bounds fix it)")
    return bits
