"""The budget of a whole release: the person run and the housing-unit run composed.

:class:`ReleaseBudget` is what a release spends (``--rho`` / ``--epsilon`` of ``censusdp
run`` set its total and keep its split); :func:`release_privacy` is the privacy loss a
release's manifest records and ``censusdp validate`` recomputes.
"""

from __future__ import annotations

from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from censusdp.errors import BudgetError
from censusdp.privacy import accounting
from censusdp.privacy.budget import Budget
from censusdp.privacy.parameters import positive_fraction

__all__ = ["ReleaseBudget", "release_privacy"]


def release_privacy(persons: Budget, units: Budget | None = None) -> dict[str, Any]:
    """The privacy loss of a whole release (the person run and the unit run composed).

    Both runs read the same people, so their losses add (sequential composition):
    zCDP ``rho`` adds exactly (:func:`~censusdp.privacy.accounting.compose`); a pure-DP
    release's ``epsilon`` adds, and its ``rho`` is the zCDP composition of its
    measurements. The reported ``delta`` is the whole of it: the target delta of the
    CKS conversion (zero for pure DP) plus the samplers' own term
    (:func:`~censusdp.privacy.accounting.sampling_delta`), which no release omits.

    Returns:
        A JSON-ready mapping: ``mechanism``, ``rho`` (and ``rho_exact``), ``epsilon``,
        ``delta`` (total), ``delta_target``, ``sampling_delta``, and each run's own
        :meth:`Budget.to_dict` under ``persons`` / ``units``.
    """
    runs = [persons] + ([units] if units is not None else [])
    if len({b.privacy_measure for b in runs}) != 1:
        raise BudgetError(
            f"the person and unit budgets use different privacy measures "
            f"({persons.privacy_measure} and {units.privacy_measure if units else None})"
        )
    rho = accounting.compose([b.rho for b in runs])
    tvs = [m.mechanism.sampling_tv * b.sensitivity for b in runs for m in b.measurements()]
    out: dict[str, Any] = {"persons": persons.to_dict()}
    if units is not None:
        out["units"] = units.to_dict()
    if persons.privacy_measure == "zCDP":
        epsilon = accounting.epsilon_from_rho(rho, persons.delta)
        target = float(persons.delta)
    else:
        epsilon = float(accounting.compose([b.total for b in runs]))
        target = 0.0
    sdelta = accounting.sampling_delta(epsilon, tvs)
    out.update(
        {
            "mechanism": persons.mechanism,
            "rho": float(rho),
            "rho_exact": str(rho),
            "epsilon": epsilon,
            "delta": min(1.0, target + sdelta),
            "delta_target": target,
            "sampling_delta": sdelta,
        }
    )
    return out


@dataclass(frozen=True)
class ReleaseBudget:
    """Everything a release spends: the person run and, optionally, the housing-unit run.

    One vocabulary for every command: a release's budget is the privacy loss of all it
    publishes. ``scaled(rho=R)`` makes the composed rho exactly ``R``; ``scaled(epsilon=E)``
    makes the composed (epsilon, delta) guarantee at the budget's delta at most ``E``
    (the largest such rho, Canonne, Kamath & Steinke 2020, Cor. 13). Both keep the split
    between the runs, between geolevels and between queries: every share is multiplied
    by one factor.

    Attributes:
        persons: the person run.
        units: the housing-unit run, or ``None`` when occupancy is not released.
    """

    persons: Budget
    units: Budget | None = None

    def __post_init__(self) -> None:
        if self.units is not None and self.units.privacy_measure != self.persons.privacy_measure:
            raise BudgetError(
                f"the person budget is {self.persons.privacy_measure} and the unit budget "
                f"{self.units.privacy_measure}; a release composes runs of one kind"
            )

    @property
    def runs(self) -> tuple[Budget, ...]:
        """The budgets of the runs, persons first."""
        return (self.persons,) if self.units is None else (self.persons, self.units)

    @property
    def rho(self) -> Fraction:
        """Composed zCDP rho of the whole release (exact)."""
        return accounting.compose([b.rho for b in self.runs])

    def epsilon(self) -> float:
        """The whole release's epsilon (at the person budget's delta for zCDP)."""
        return float(release_privacy(self.persons, self.units)["epsilon"])

    def scaled(
        self,
        *,
        rho: Fraction | str | float | int | None = None,
        epsilon: Fraction | str | float | int | None = None,
    ) -> ReleaseBudget:
        """The same split with a new total: composed ``rho`` = ``rho``, or composed epsilon
        at most ``epsilon``.

        Raises:
            BudgetError: for neither or both of ``rho`` and ``epsilon``.
        """
        if (rho is None) == (epsilon is None):
            raise BudgetError("give exactly one of rho or epsilon to rescale a release budget")
        totals = [b.total for b in self.runs]
        if self.persons.privacy_measure == "zCDP":
            target = (
                positive_fraction(rho, "rho")
                if rho is not None
                else accounting.rho_from_epsilon(epsilon, self.persons.delta)
            )
            factor = target / sum(totals, Fraction(0))
            return ReleaseBudget(*(b.scaled(rho=b.total * factor) for b in self.runs))
        if epsilon is None:
            one = self.persons.scaled(rho=rho).total / self.persons.total
            return ReleaseBudget(*(b.scaled(epsilon=b.total * one) for b in self.runs))
        factor = positive_fraction(epsilon, "epsilon") / sum(totals, Fraction(0))
        return ReleaseBudget(*(b.scaled(epsilon=b.total * factor) for b in self.runs))

    def to_dict(self) -> dict[str, Any]:
        """The manifest's record (see :func:`release_privacy`)."""
        return release_privacy(self.persons, self.units)
