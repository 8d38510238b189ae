"""Privacy: what a release may spend and what spending it costs.

* :mod:`censusdp.privacy.budget` -- the typed :class:`~censusdp.privacy.budget.Budget`
  (schema, geolevel and query shares, the global rho or pure epsilon) and its planned
  measurements;
* :mod:`censusdp.privacy.budget_config` -- the TOML budget format (presets and user
  configs): a parsed document or TOML text made into a validated ``Budget``;
* :mod:`censusdp.privacy.release_budget` -- the budget of a whole release (the person
  and housing-unit runs composed) and the privacy loss a manifest records;
* :mod:`censusdp.privacy.budget_report` -- the allocation report of ``censusdp budget``;
* :mod:`censusdp.privacy.accounting` -- every conversion between rho, epsilon and delta
  (Canonne, Kamath & Steinke 2020), rounded in the conservative direction;
* :mod:`censusdp.privacy.mechanisms` -- noise mechanisms that know their own cost;
* :mod:`censusdp.privacy.randomness` -- the one source of randomness (secure AES-CTR for
  releases, seeded for experiments).

This package reads no files: the shipped presets (``presets/*.toml``, package data) and a
user's config files are opened by :mod:`censusdp.io.budget_files`, whose
:func:`~censusdp.io.budget_files.resolve_budget` is the one way a command turns
``--preset/--config/--rho/--epsilon`` into budgets.
"""
