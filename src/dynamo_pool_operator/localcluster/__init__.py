"""A local cluster on this machine: a real etcd + kube-apiserver (+ kube-controller-manager's
controllers, kwok nodes, Submariner Lighthouse) built from pinned Go modules.

`dynamo-pool-operator dev`, the tests and the benchmark share it; the operator itself
never imports it (an import-linter contract in pyproject.toml keeps `process` from it).
"""
