"""Benchmarks of dynamo-pool-operator against a local control plane (`bench/run`)."""
