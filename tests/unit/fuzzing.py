"""The fuzzers' shared example budget (one knob for every hypothesis fuzzer)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings


def budget(default: int) -> settings:
    """`default` examples, or DPO_FUZZ_EXAMPLES when set (a bigger run by hand or in CI)."""
    examples = int(os.environ.get("DPO_FUZZ_EXAMPLES", default))
    return settings(
        max_examples=examples,
        deadline=None,  # a shared 2-core CI box: timing is not what these tests check
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    )
