import os
import sys
from pathlib import Path

import pytest
from hypothesis import settings

sys.path.insert(0, str(Path(__file__).parent))

import profiles  # noqa: E402  (needs the tests directory on the path)

settings.load_profile(profiles.profile_name())


@pytest.fixture(autouse=True)
def _cold_profile_caches_under_mutation_testing():
    """Under mutmut (``MUTANT_UNDER_TEST`` set), start every test with empty noise caches.

    mutmut runs each mutant in a process forked after a full test run, so tables cached
    there would hide mutants of the code that builds them. Ordinary runs keep the caches.
    """
    if "MUTANT_UNDER_TEST" in os.environ:
        import gc

        from censusdp.mechanisms import _discrete

        _discrete._gauss_profile.cache_clear()
        _discrete._geometric_profile.cache_clear()
        for obj in gc.get_objects():
            if isinstance(obj, _discrete._TableMechanism):
                obj.__dict__.pop("_cached_profile", None)
    yield
