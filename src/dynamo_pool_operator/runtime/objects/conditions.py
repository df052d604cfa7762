"""metav1.Condition lists: find one by type, and the timestamps conditions carry.

Generic on purpose: which conditions exist and how they enter a status is the API's
and the reconciler's, not the runtime's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

#: metav1.Condition's message limit.
MESSAGE_LIMIT = 32768


def rfc3339(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def parse_rfc3339(text: object) -> datetime | None:
    """A timestamp as the API server writes it; None when absent or malformed."""
    if not isinstance(text, str):
        return None
    try:
        return datetime.fromisoformat(text)  # reads the "Z" suffix since Python 3.11
    except ValueError:
        return None


def seconds_since(stamp: object, now: datetime) -> float | None:
    """Seconds from an API server timestamp to `now`; None when absent or malformed."""
    moment = parse_rfc3339(stamp)
    return None if moment is None else (now - moment).total_seconds()


def find(conditions: object, type_: str) -> Mapping[str, Any] | None:
    """The condition of `type_` in a (possibly malformed) list, or None."""
    if not isinstance(conditions, Sequence) or isinstance(conditions, str):
        return None
    return next((c for c in conditions if isinstance(c, Mapping) and c.get("type") == type_), None)
