// A stand-in for sigs.k8s.io/mcs-api/conformance, which the Go module proxy
// does not serve. Only Cilium's tests import it; nothing built here does.
module sigs.k8s.io/mcs-api/conformance

go 1.26.0
