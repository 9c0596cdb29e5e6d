"""The test CA every network test trusts (or does not): made once per session by ``trustme``."""

from __future__ import annotations

import pytest

from .helpers import Pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory) -> Pki:
    return Pki.make(tmp_path_factory.mktemp("pki"))
