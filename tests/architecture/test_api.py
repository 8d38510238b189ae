"""The public Python API: exported names, and its documented session runs as written."""

from __future__ import annotations

import doctest

import censusdp
import censusdp.api


def test_package_exports_its_api() -> None:
    assert set(censusdp.__all__) == set(censusdp.api.__all__) | {"__version__"}
    for name in censusdp.api.__all__:
        assert getattr(censusdp, name) is getattr(censusdp.api, name)
        assert getattr(censusdp.api, name).__doc__, name


def test_api_session_in_the_docstring_runs() -> None:
    result = doctest.testmod(censusdp.api, optionflags=doctest.ELLIPSIS)
    assert result.attempted >= 8 and result.failed == 0
