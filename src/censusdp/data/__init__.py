"""The data model: what a census record is, where it lives, and what is counted.

* :mod:`censusdp.data.schema` -- attributes, levels, the detailed cell index;
* :mod:`censusdp.data.geography` -- geocodes, geolevels and the geounit hierarchy;
* :mod:`censusdp.data.queries` -- linear queries (marginals) on the detailed histogram;
* :mod:`censusdp.data.invariants` -- the exact public counts and the constraints they imply;
* :mod:`censusdp.data.histograms` -- every histogram builder: records to detailed block
  histograms, and block histograms up the hierarchy.
"""

from censusdp.data import schema_dhc as schema_dhc  # registers the 2020 DHC schemas
