"""The 2010-style attack on block tables: reconstruction, then re-identification.

* :mod:`~censusdp.attacks.dhc.tables` -- the DHC-style block tables an attacker reads;
* :mod:`~censusdp.attacks.dhc.reconstruct` -- per-block integer programs (no file I/O),
  with the tract re-pairing of ``_refine``;
* :mod:`~censusdp.attacks.dhc.scoring` -- one-to-one match counts against the truth;
* :mod:`~censusdp.attacks.dhc.reid` -- record linkage to a commercial-style file;
* :mod:`~censusdp.attacks.dhc.runs` -- the file drivers (``censusdp attack reconstruct/reid``);
* :mod:`~censusdp.attacks.dhc.sweep` -- the attacks across protections and budgets.
"""
