"""Privacy: what a release may spend and what spending it costs.

* :mod:`censusdp.privacy.budget` -- the typed :class:`~censusdp.privacy.budget.Budget`
  (schema, geolevel and query shares, the global rho or pure epsilon), the presets and
  TOML configurations, and :func:`~censusdp.privacy.budget.resolve_budget`, the one way
  a command turns ``--preset/--config/--rho/--epsilon`` into budgets;
* :mod:`censusdp.privacy.accounting` -- every conversion between rho, epsilon and delta
  (Canonne, Kamath & Steinke 2020), rounded in the conservative direction;
* :mod:`censusdp.privacy.mechanisms` -- noise mechanisms that know their own cost;
* :mod:`censusdp.privacy.randomness` -- the one source of randomness (secure AES-CTR for
  releases, seeded for experiments).
"""
