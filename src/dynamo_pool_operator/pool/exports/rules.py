"""The export feature's pure half: what a pass plans and reports for the exports, from
the snapshot and the feature's settings alone. The pure plan and report phases
(`pool/plan.py`, `pool/status.py`) call it directly; the half that reads the caches
(`feature.PoolExports`) hands over its settings as they stand (`PoolExports.rules`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from dynamo_pool_operator.api.mcs import ClusterID, Confirmation, Implementation
from dynamo_pool_operator.api.status import ConditionType, ExportState
from dynamo_pool_operator.pool.exports import plan as export_plan
from dynamo_pool_operator.pool.exports import verdict
from dynamo_pool_operator.pool.model import (
    ActionResult,
    Advisory,
    ConditionView,
    Contribution,
    Decision,
    Report,
    Result,
    Snapshot,
    Verb,
)
from dynamo_pool_operator.runtime.objects import Resource, is_controlled_by, rfc3339


@dataclass(frozen=True, slots=True)
class ExportRules:
    """The settings the exports are planned and reported with."""

    implementation: Implementation
    #: The ServiceExport resource written; None while the API is not served.
    resource: Resource | None
    #: The About API's "group/version" the cluster's ID property is read at; "" for none.
    about_version: str = ""
    unconfirmed_after: timedelta = verdict.UNCONFIRMED_AFTER
    confirmation: Confirmation = Confirmation.REQUIRED

    def plan(self, snapshot: Snapshot, decision: Decision) -> Contribution:
        if snapshot.exports_unavailable or self.resource is None:
            return Contribution()
        relay = snapshot.relay
        hold = export_plan.relay_export_hold(
            relay, snapshot.relay_objects.get("Service"), snapshot.shown_exports, snapshot.read_at
        )
        out = export_plan.plan(
            relay,
            decision,
            snapshot.pool,
            snapshot.exports,
            implementation=self.implementation,
            cluster_id=snapshot.cluster_id,
            resource=self.resource,
            hold=hold,
            services=snapshot.services,
            component_deployments=snapshot.component_deployments,
        )
        if decision.publish and snapshot.unreadable:
            related = ClusterID(api_version=self.about_version).reference()
            unreadable = tuple(
                Advisory(export_plan.Warn.EXPORT_FAILED, "ReadClusterID", str(e), related)
                for e in snapshot.unreadable
            )
            out = dataclasses.replace(out, advisories=unreadable + out.advisories)
        return out

    def report(
        self,
        snapshot: Snapshot,
        decision: Decision,
        contribution: Contribution,
        results: Sequence[ActionResult],
        *,
        now: datetime,
    ) -> Report:
        """The lines after execution, each export we hold with the implementation's own
        view of it, and the `Exported` condition from the implementation's verdicts."""
        relay = snapshot.relay
        if snapshot.exports_unavailable:
            said = verdict.api_unavailable(snapshot.exports_unavailable, published=decision.publish)
            return Report(
                (), ConditionView(ConditionType.EXPORTED, said.status, said.reason, said.message)
            )
        held = {
            name: obj for name, obj in snapshot.exports.items() if is_controlled_by(obj, relay.uid)
        }
        # An export this pass created is not cached yet: judged as the fresh export it
        # is (created now, nothing written), as the next pass will see it from the cache.
        for r in results:
            if r.action.verb is Verb.CREATE and r.result is Result.DONE:
                held[r.action.name] = {"metadata": {"creationTimestamp": rfc3339(now)}}
        verdicts = {
            name: verdict.verdict(
                obj,
                now=now,
                unconfirmed_after=self.unconfirmed_after,
                confirmation=self.confirmation,
            )
            for name, obj in held.items()
        }
        lines = [
            dataclasses.replace(line, implementation=verdicts[line.name].view)
            if line.state == ExportState.EXPORTED and line.name in verdicts
            else line
            for line in verdict.lines_after(contribution, results)
        ]
        exported = verdict.exported(lines, verdicts, published=decision.publish)
        about = snapshot.exports.get(exported.about)
        # The resource of the plan's actions: the one in effect may have changed since.
        resource = next((a.resource for a in contribution.actions), self.resource)
        related = (
            resource.reference(dict(about)) if about is not None and resource is not None else None
        )
        rechecks = [t for t in (exported.recheck_at, contribution.recheck_at) if t is not None]
        condition = ConditionView(
            ConditionType.EXPORTED,
            exported.status,
            exported.reason,
            exported.message,
            min(rechecks, default=None),
            related,
        )
        return Report(tuple(lines), condition)
