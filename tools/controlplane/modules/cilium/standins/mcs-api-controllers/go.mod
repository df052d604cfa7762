// A stand-in for sigs.k8s.io/mcs-api/controllers, which the Go module proxy
// does not serve. Cilium's operator uses one constant from it; see controllers.go.
module sigs.k8s.io/mcs-api/controllers

go 1.26.0
