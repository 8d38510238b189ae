"""The 2010-style attack on block tables: reconstruction, then re-identification.

* :mod:`~censusdp.attacks.dhc.tables` -- the DHC-style block tables an attacker reads;
* :mod:`~censusdp.attacks.dhc.reconstruct` -- per-block integer programs (no file I/O);
* :mod:`~censusdp.attacks.dhc.reid` -- record linkage to a commercial-style file;
* :mod:`~censusdp.attacks.dhc.runs` -- the file drivers (``censusdp attack reconstruct/reid``);
* :mod:`~censusdp.attacks.dhc.sweep` -- the attacks across protections and budgets.
"""
