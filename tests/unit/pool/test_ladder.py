"""The verb ladder (pool/ladder.py): each rung, and which rung wins when several could.

Every owned object climbs it (the relay's Deployment and Service, each export), so each
case below names the rung it pins; breaking any one rung fails a case of its own.
"""

from __future__ import annotations

from typing import Any

import pytest

from dynamo_pool_operator.pool.ladder import Owned, Part, Rule, Rung, Step, ladder
from dynamo_pool_operator.pool.model import Verb

UID = "relay-uid"
MANAGER = "dynamo-pool-operator"
WHOLE = Rule()
BODY: dict[str, Any] = {"metadata": {"name": "x"}, "spec": {"a": 1}}


def obj(
    *,
    owner: str | None = UID,
    terminating: bool = False,
    a: int = 1,
    created_by_update: bool = False,
) -> dict[str, Any]:
    """A cached object: controlled by `owner` (None: no controller), spec.a = `a`."""
    meta: dict[str, Any] = {"name": "x", "uid": "obj-uid", "resourceVersion": "7"}
    if owner is not None:
        meta["ownerReferences"] = [{"uid": owner, "controller": True}]
    if terminating:
        meta["deletionTimestamp"] = "2026-12-01T00:00:00Z"
    if created_by_update:
        meta["managedFields"] = [{"manager": MANAGER, "operation": "Update"}]
    return {"metadata": meta, "spec": {"a": a}}


def owned(live: dict[str, Any] | None, **kw: Any) -> Owned:
    return Owned(live, kw.pop("body", BODY), UID, kw.pop("rule", WHOLE), **kw)


CASES = [
    # 1. not wanted
    pytest.param(owned(None, wanted=False), None, Rung.UNTOUCHED, id="1-unwanted-absent"),
    pytest.param(
        owned(obj(owner="other"), wanted=False), None, Rung.UNTOUCHED, id="1-unwanted-foreign"
    ),
    pytest.param(
        owned(obj(owner=None), wanted=False), None, Rung.UNTOUCHED, id="1-unwanted-no-controller"
    ),
    pytest.param(owned(obj(), wanted=False), Verb.WITHDRAW, Rung.UNWANTED, id="1-unwanted-ours"),
    pytest.param(
        owned(None, wanted=False, may_be_hidden=True), Verb.LOOK, Rung.HIDDEN, id="1-hidden"
    ),
    pytest.param(
        owned(obj(owner="other"), wanted=False, may_be_hidden=True),
        None,
        Rung.UNTOUCHED,
        id="1-hidden-only-absent",
    ),
    pytest.param(
        owned(obj(terminating=True), wanted=False),
        Verb.WAIT,
        Rung.UNWANTED,
        id="1-unwanted-ours-deleting",
    ),
    pytest.param(
        owned(obj(), wanted=False, body=None), Verb.WITHDRAW, Rung.UNWANTED, id="1-before-2"
    ),
    # 2. held
    pytest.param(owned(obj(a=2), body=None), Verb.HOLD, Rung.HELD, id="2-held-drifted"),
    pytest.param(owned(None, body=None), Verb.HOLD, Rung.HELD, id="2-held-absent"),
    pytest.param(owned(obj(), body=None, replace=True), Verb.HOLD, Rung.HELD, id="2-before-3"),
    # 3. replaced
    pytest.param(owned(obj(), replace=True), Verb.WITHDRAW, Rung.REPLACED, id="3-replaced"),
    pytest.param(
        owned(obj(terminating=True), replace=True),
        Verb.WAIT,
        Rung.REPLACED,
        id="3-replaced-deleting",
    ),
    pytest.param(
        owned(obj(owner="other"), replace=True), Verb.FOREIGN, Rung.FOREIGN, id="3-only-ours"
    ),
    pytest.param(
        owned(obj(owner="other", terminating=True), replace=True),
        Verb.WAIT,
        Rung.DELETING,
        id="3-only-ours-deleting",
    ),
    pytest.param(owned(None, replace=True), Verb.CREATE, Rung.ABSENT, id="3-absent-is-created"),
    # 4. absent
    pytest.param(owned(None), Verb.CREATE, Rung.ABSENT, id="4-absent"),
    pytest.param(owned(None, create=False), None, Rung.DEFERRED, id="4-deferred"),
    pytest.param(owned(obj(), create=False), Verb.NONE, Rung.RIGHT, id="4-deferred-only-absent"),
    # 5. being deleted
    pytest.param(owned(obj(terminating=True)), Verb.WAIT, Rung.DELETING, id="5-deleting"),
    pytest.param(
        owned(obj(owner="other", terminating=True)), Verb.WAIT, Rung.DELETING, id="5-before-6"
    ),
    pytest.param(owned(obj(terminating=True, a=2)), Verb.WAIT, Rung.DELETING, id="5-before-7"),
    # 6. someone else's
    pytest.param(owned(obj(owner="other")), Verb.FOREIGN, Rung.FOREIGN, id="6-foreign"),
    pytest.param(owned(obj(owner=None)), Verb.FOREIGN, Rung.FOREIGN, id="6-no-controller"),
    pytest.param(
        owned(obj(owner="other", a=2)), Verb.FOREIGN, Rung.FOREIGN, id="6-foreign-drifted"
    ),
    pytest.param(Owned(obj(), BODY, "", WHOLE), Verb.FOREIGN, Rung.FOREIGN, id="6-no-owner-uid"),
    # 7. ours
    pytest.param(owned(obj()), Verb.NONE, Rung.RIGHT, id="7-right"),
    pytest.param(owned(obj(a=2)), Verb.APPLY, Rung.DRIFTED, id="7-drifted"),
]


@pytest.mark.parametrize(("o", "verb", "rung"), CASES)
def test_each_rung_decides_its_objects(o: Owned, verb: Verb | None, rung: Rung) -> None:
    step = ladder(o)
    assert (step.verb, step.rung) == (verb, rung)


def test_only_a_create_of_a_kind_its_cache_may_hide_reads_a_name_found_taken() -> None:
    assert ladder(owned(None, may_be_hidden=True)).read_if_taken
    assert not ladder(owned(None)).read_if_taken
    for live in (obj(), obj(a=2), obj(terminating=True), obj(owner="other")):
        assert not ladder(owned(live, may_be_hidden=True)).read_if_taken


def test_a_create_never_handed_over_is_handed_over_before_its_first_apply_only() -> None:
    created = obj(created_by_update=True)
    assert ladder(owned(created, apply_manager=MANAGER)) == Step(Verb.NONE, Rung.RIGHT)
    drifted = obj(a=2, created_by_update=True)
    step = ladder(owned(drifted, apply_manager=MANAGER))
    assert (step.verb, step.hand_over) == (Verb.APPLY, True)
    # A kind without an apply manager never hands over, whoever created it (a create
    # records its manager's Update entry: exports are created and never handed over).
    for manager in (MANAGER, ""):
        drifted["metadata"]["managedFields"] = [{"manager": manager, "operation": "Update"}]
        assert not ladder(owned(drifted)).hand_over
    assert not ladder(owned(obj(a=2), apply_manager=MANAGER)).hand_over, "already handed over"


def test_the_drift_verdict_carries_the_parts_that_differ() -> None:
    rule = Rule(parts=(Part("a", lambda o: o["spec"]["a"]), Part("name", lambda o: o["metadata"])))
    step = ladder(owned(obj(a=2), rule=rule))
    assert (step.verb, step.drift.fields) == (Verb.APPLY, ("a",))
    assert ladder(owned(obj(), rule=rule)).drift.fields == ()


def test_the_drift_rule_is_asked_only_of_an_object_of_ours_that_stays() -> None:
    """A drift verdict on someone else's object, or one going, decides nothing."""
    asked: list[Any] = []

    def part(o: Any) -> Any:
        asked.append(o)
        return o["spec"]

    rule = Rule(parts=(Part("spec", part),))
    for live in (None, obj(owner="other"), obj(terminating=True)):
        ladder(owned(live, rule=rule))
        ladder(owned(live, rule=rule, wanted=False))
    assert asked == []
    ladder(owned(obj(), rule=rule))
    assert asked != []
