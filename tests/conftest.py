"""Test-session settings: the native back end's object cache goes to a temporary
directory, never the user's cache."""

from __future__ import annotations

import os
import tempfile

import pytest


@pytest.fixture(autouse=True, scope="session")
def _native_object_cache():
    with tempfile.TemporaryDirectory(prefix="kanedyn-cache-") as path:
        old = os.environ.get("KANEDYN_CACHE_DIR")
        os.environ["KANEDYN_CACHE_DIR"] = path
        yield
        if old is None:
            os.environ.pop("KANEDYN_CACHE_DIR", None)
        else:
            os.environ["KANEDYN_CACHE_DIR"] = old
