// Package controllers stands in for sigs.k8s.io/mcs-api/controllers when
// building cilium-operator from the Go module proxy, which does not serve that
// module. Cilium's non-test code reads one name from it: the annotation on a
// ServiceImport that names its derived Service (the KEP-1645 reference
// implementation's value, which Cilium writes and reads as is).
package controllers

// DerivedServiceAnnotation is set on a ServiceImport to name its derived Service.
const DerivedServiceAnnotation = "multicluster.kubernetes.io/derived-service"
