"""`manifests crds --apply` decides before it writes: never a newer operator's CRD replaced
by an older one unless asked, never a CRD that strands objects at a stored version.

The apply itself, against the real API server and through `helm upgrade`, is in
tests/e2e/test_crd_upgrade.py; these are the rules, row by row.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from dynamo_pool_operator import __version__
from dynamo_pool_operator.api import crd
from dynamo_pool_operator.crd_install import made_by, refusal, release_key


@pytest.mark.parametrize(
    ("older", "newer"),
    [
        ("0.1.0", "0.2.0"),
        ("0.9.1", "0.10.0"),
        ("0.2.0rc1", "0.2.0"),
        ("0.2.0-rc.1", "0.2.0"),
        ("0.2.0a1", "0.2.0b1"),
        ("0.2.0b2", "0.2.0rc1"),
        ("0.2.0.dev3", "0.2.0a1"),
        ("0.2.0", "0.2.0.post1"),
        ("1.0", "1.0.1"),
        ("v1.2.3", "1.2.4"),
        ("0.0.0+unknown", "0.0.1"),
    ],
)
def test_release_order(older: str, newer: str) -> None:
    a, b = release_key(older), release_key(newer)
    assert a is not None
    assert b is not None
    assert a < b


@pytest.mark.parametrize(("a", "b"), [("1.0", "1.0.0"), ("0.2.0+local", "0.2.0"), ("v2", "2.0")])
def test_equal_releases(a: str, b: str) -> None:
    assert release_key(a) == release_key(b)


@pytest.mark.parametrize("text", ["", "latest", "main-abc123", "1.0.0-SNAPSHOT", "one.two"])
def test_what_is_not_a_release(text: str) -> None:
    assert release_key(text) is None


def made(version: str | None, stored: list[str] | None = None) -> dict[str, Any]:
    """Our CRD as an operator of `version` made it, with `stored` as storedVersions."""
    obj = copy.deepcopy(crd.crd())
    if version is None:
        del obj["metadata"]["annotations"][crd.VERSION_ANNOTATION]
    else:
        obj["metadata"]["annotations"][crd.VERSION_ANNOTATION] = version
    obj["status"] = {"storedVersions": stored or [crd.VERSION]}
    return obj


def test_the_crd_says_which_operator_made_it() -> None:
    assert made_by(crd.crd()) == __version__
    assert made_by({"metadata": {}}) is None


@pytest.mark.parametrize(
    ("installed", "desired", "allowed", "refused"),
    [
        (None, "0.2.0", False, None),  # nothing installed: create
        ("", "0.2.0", False, None),  # no annotation: made before it existed
        ("0.1.0", "0.2.0", False, None),  # an upgrade
        ("0.2.0", "0.2.0", False, None),  # the same version again
        ("0.3.0", "0.2.0", False, "newer than this binary (0.2.0)"),
        ("0.3.0", "0.2.0", True, None),  # asked for
        ("0.2.0", "0.2.0rc1", False, "newer than this binary (0.2.0rc1)"),
        ("nightly", "0.2.0", False, "cannot tell which is newer"),
        ("nightly", "0.2.0", True, None),
    ],
)
def test_downgrades_are_refused_unless_asked(
    installed: str | None, desired: str, allowed: bool, refused: str | None
) -> None:
    have = None if installed is None else made(installed or None)
    why = refusal(have, made(desired), allow_downgrade=allowed)
    if refused is None:
        assert why is None
    else:
        assert why is not None
        assert refused in why
        assert "--allow-downgrade (chart: crds.allowDowngrade=true)" in why


@pytest.mark.parametrize("allowed", [False, True])
def test_a_crd_that_does_not_serve_a_stored_version_is_refused_even_when_asked(
    allowed: bool,
) -> None:
    have = made("0.1.0", stored=["v1alpha0", crd.VERSION])
    why = refusal(have, made("0.2.0"), allow_downgrade=allowed)
    assert why is not None
    assert "stored at v1alpha0 (status.storedVersions)" in why
    assert f"to a version this one serves ({crd.VERSION})" in why
    assert "remove v1alpha0 from the CRD's status.storedVersions first" in why
    # A stored version it still serves is no obstacle.
    assert refusal(made("0.1.0", [crd.VERSION]), made("0.2.0"), allow_downgrade=False) is None
