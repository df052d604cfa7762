// Package conformance stands in for sigs.k8s.io/mcs-api/conformance so that
// the module graph of github.com/cilium/cilium resolves without it; only
// Cilium's tests import the real one, and no binary built here links it.
package conformance
