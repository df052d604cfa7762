"""One module sends the writes of the objects relays own: `runtime/writes/guarded.py`.

The "never adopt, write only with uid + resourceVersion" promise holds only if no
other code creates, applies or deletes such an object on its own. This reads the
source and finds every client write call; each must be in a module with a reason to
write something that is not an owned object (the Lease, Events, the relay's own
status subresource, the demo's and tests' setup), or in the guarded writes.
"""

from __future__ import annotations

import ast
from pathlib import Path

import dynamo_pool_operator

PACKAGE = Path(dynamo_pool_operator.__file__).parent
WRITES = {"create", "apply", "delete", "merge_patch", "replace"}

#: Modules that may write, and what they write.
ALLOWED = {
    "runtime/writes/guarded.py": "the guarded writes themselves",
    "runtime/client/rest.py": "the verbs' definitions",
    "runtime/leader.py": "the Lease",
    "runtime/events.py": "Events and their series",
    "runtime/serving/auth.py": "TokenReviews and SubjectAccessReviews (create-only reviews)",
    "check/cluster.py": "a SelfSubjectReview (create-only)",
    "rbac.py": "SelfSubjectAccessReviews and a SelfSubjectReview (create-only reviews)",
    "crd_install.py": "our CRD, applied by `manifests crds --apply` (the chart's upgrade hook)",
    "dev.py": "the demo's DGD and relay",
}


def client_writes(path: Path) -> list[tuple[int, str, bool]]:
    """(line, method, to the status subresource) of each `<...client...>.<write>(...)`."""
    out = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        if node.func.attr not in WRITES or "client" not in ast.unparse(node.func.value):
            continue
        status = any(
            k.arg == "subresource"
            and isinstance(k.value, ast.Constant)
            and k.value.value == "status"
            for k in node.keywords
        )
        out.append((node.lineno, node.func.attr, status))
    return out


def test_only_the_guarded_writes_write_owned_objects() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED or rel.startswith("testing/"):
            continue
        writes = client_writes(path)
        # The relay's own status is the one write of the relay pipeline itself.
        if rel == "pool/execute.py":
            writes = [w for w in writes if not (w[1] == "apply" and w[2])]
        if writes:
            found[rel] = writes
    assert found == {}, f"client writes outside runtime/writes/guarded.py: {found}"


def test_the_scan_finds_a_write() -> None:
    """The scan itself can fail: it sees the guarded module's own writes."""
    writes = client_writes(PACKAGE / "runtime" / "writes" / "guarded.py")
    assert {m for _, m, _ in writes} == {"create", "apply", "delete", "merge_patch"}
    status = client_writes(PACKAGE / "pool" / "execute.py")
    assert [(m, s) for _, m, s in status] == [("apply", True)]
