"""The relay controller's caches: what each keeps shared (`relay_caches`)."""

from __future__ import annotations

import sys
import uuid
from typing import Any

import orjson

from dynamo_pool_operator.pool import controller
from dynamo_pool_operator.runtime.cache.shared import SharedInformers
from tests.unit.runtime.client.fake import FakeClient


def _caches() -> Any:
    informers = SharedInformers(FakeClient())
    return controller.relay_caches(informers, namespace=None, dgd_version="v1beta1")


def test_relays_and_dgds_intern_their_own_vocabulary_and_not_their_names() -> None:
    """Export states and component types repeat across a fleet's relays and DGDs: one
    string each. Names (the pool's, an export's) are each object's own."""
    token = uuid.uuid4().hex[:8]
    state, kind = (sys.intern("".join([w, token])) for w in ("Exported", "frontend"))
    name = sys.intern("".join(["pool-", token]))
    caches = _caches()
    relay = orjson.loads(
        orjson.dumps(
            {
                "metadata": {"name": name, "namespace": "ns"},
                "status": {
                    "exports": [
                        {"name": name, "state": state, "ready": {"status": "True"}},
                    ]
                },
            }
        )
    )
    line = caches.relays._prepare(relay)["status"]["exports"][0]
    assert line["state"] is state
    assert line["name"] is not name
    dgd = orjson.loads(
        orjson.dumps(
            {
                "metadata": {"name": name, "namespace": "ns"},
                "spec": {"components": [{"name": "Frontend", "type": kind}]},
            }
        )
    )
    component = caches.dgds._prepare(dgd)["spec"]["components"][0]
    assert component["type"] is kind
    assert caches.dgds.vocabulary == controller.DGD_VOCABULARY
    assert caches.relays.vocabulary == controller.RELAY_VOCABULARY


def test_the_relay_objects_are_watched_by_the_labels_only_they_carry() -> None:
    """The API server sends no other Deployment (decision 0006); with exports on, every
    Service is watched (a foreign one of a frontend's name must be seen), as stubs."""
    from dynamo_pool_operator.api import names

    caches = _caches()
    selector = controller.RELAY_OBJECT_SELECTOR
    assert caches.deployments.label_selector == selector
    assert caches.services.label_selector == selector
    wanted = dict(pair.split("=") for pair in selector.split(","))
    assert wanted.items() <= names.owned_object_labels("pool").items()
    assert not wanted.items() <= names.selector("pool").items()  # not the pods' labels
    informers = SharedInformers(FakeClient())
    exported = controller.relay_caches(
        informers, namespace=None, dgd_version="v1beta1", frontends=True
    )
    assert exported.deployments.label_selector == selector
    assert exported.services.label_selector is None
