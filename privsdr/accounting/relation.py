"""Neighbouring relations (the privacy unit) and guarantee status."""
from __future__ import annotations

import enum


class Relation(str, enum.Enum):
    """Which datasets are neighbours.

    * ``replace_one``: bounded DP, n public; one record is replaced by another.
    * ``add_remove``: unbounded DP; one record is added or removed.
    * ``replace_entry``: one attribute value of one person changes (entry-level, PRIDE's S-DP).
    * ``lsdp_zero_row``: NOT a standard DP relation. Locally sensitive DP as claimed by de Jong et
      al. (2022, Def. 2; spec dpbcd_002.md §4): only the actual data set and its copies with one row
      zero-filled are neighbours. Its nodes are published claims (status ``claimed``, "eps-LSDP
      claimed, not standard DP"); because a ledger composes charges of one relation only, they can
      never be composed with standard-DP charges.

    Sensitivities are always computed under the node's own relation; the accountants then treat the
    declared sensitivity as the distance between the two output distributions (see
    ``accounting.events``), so RDP and PLD agree for every relation.
    """

    REPLACE_ONE = "replace_one"
    ADD_REMOVE = "add_remove"
    REPLACE_ENTRY = "replace_entry"
    LSDP_ZERO_ROW = "lsdp_zero_row"

    @property
    def standard(self) -> bool:
        """Whether a guarantee under this relation is differential privacy in the standard sense."""
        return self is not Relation.LSDP_ZERO_ROW

    @classmethod
    def parse(cls, value: Relation | str) -> Relation:
        try:
            return cls(value)
        except ValueError:
            names = ", ".join(r.value for r in cls)
            raise ValueError(f"unknown neighbouring relation {value!r}; expected one of {names}") from None


def parse_relation(value: Relation | str) -> Relation:
    """``Relation.parse`` as a plain function: an attrs converter (mypy's attrs plugin takes no classmethod)."""
    return Relation.parse(value)


class Status(str, enum.Enum):
    """Guarantee status of a release node (DESIGN.md).

    * ``certified``: the proof's assumptions are enforced by the code.
    * ``claimed``: a published guarantee whose assumptions the code cannot enforce.
    * ``none``: not private (e.g. a raw index upload).
    """

    CERTIFIED = "certified"
    CLAIMED = "claimed"
    NONE = "none"

    @property
    def rank(self) -> int:
        return {"certified": 0, "claimed": 1, "none": 2}[self.value]

    @classmethod
    def worst(cls, statuses: list[Status]) -> Status:
        return max(statuses, key=lambda s: s.rank, default=cls.CERTIFIED)
