"""The release validator: proves that a release obeys every constraint, after every run.

Checks (each recorded with its outcome in the manifest):

* ``nonnegative_integers``: every released count is a non-negative integer;
* ``hierarchy_consistent``: at every level each unit's histogram is the sum of its
  children's (so every table adds up across geography);
* ``state_totals_exact``: the invariant total population of each state (and the US);
* ``gq_and_housing_constraints``: at every block and every level, the population of
  each GQ type is at least its number of occupied facilities and zero where there is
  none, household population zero where there is no housing unit;
* ``structural_zeros``: no released person in a structural-zero cell;
* ``units_consistent``: occupied housing units never exceed housing units, and the unit
  histogram is consistent across levels;
* ``persons_units_consistent`` (a release whose unit run was held to its persons): per
  block, occupied housing units at most the household persons, at least one where
  there are household persons, and household persons only where housing units exist;
* ``mdf_matches_histogram`` and ``tables_match_mdf``: the MDF and the tables were
  produced from the estimated block histograms.

A release on disk (:func:`validate_run`) is also checked for what only its files can
show: that it holds exactly the files its manifest lists (``checksums``), that the
privacy loss it states is the one its recorded budgets compose to
(``privacy_loss``), that its randomness record is consistent with its history
(``randomness``), that its text MDF is its Parquet MDF (``mdf_text_matches_parquet``),
and that its tables carry the geography's identifiers and their codebook
(``tables_match_mdf``, ``codebook``).

The package, by concern: :mod:`~censusdp.release.validate.report` (the report),
:mod:`~censusdp.release.validate.estimate` (the checks of an estimate in memory),
:mod:`~censusdp.release.validate.run` (a release on disk: :func:`validate_run`,
:func:`require_valid`), :mod:`~censusdp.release.validate.measured` (a run's NMF checked
as soon as it is measured, beside its estimation), and its private modules: ``_manifest`` (privacy loss and
randomness), ``_entries`` (the directory's entries and checksums), ``_release`` (the
release rebuilt from its files), ``_nmf`` and ``_nmf_rows`` (the NMF check and its
row-counting kernel), ``_mdf`` and ``_mdf_parts`` (the MDF, its text files and tables,
and its part files read as tasks), ``_truth`` (the truth check).
"""

from censusdp.release.validate.estimate import (
    UnitRun,
    Written,
    check_bounds,
    check_hierarchy,
    validate_release,
)
from censusdp.release.validate.report import ValidationReport
from censusdp.release.validate.run import require_valid, validate_run

__all__ = [
    "UnitRun",
    "Written",
    "ValidationReport",
    "check_bounds",
    "check_hierarchy",
    "validate_release",
    "require_valid",
    "validate_run",
]
