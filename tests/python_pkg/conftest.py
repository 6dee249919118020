import pytest

from fa_check import SEED, rng_for


def pytest_report_header(config):
    return f"flashattn test seed: {SEED} (pin with FLASHATTN_TEST_SEED)"


@pytest.fixture
def rng(request):
    return rng_for(request.node.nodeid)
