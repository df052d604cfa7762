"""A local cluster on this machine (etcd, kube-apiserver, kube-controller-manager, kwok,
Lighthouse, from pinned Go modules) for `dev`, the tests and the benchmark; the
operator never imports it (an import-linter contract keeps `process` from it).
"""
