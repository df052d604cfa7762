"""The DynamoPoolRelay controller: publish and withdraw a pool's relay (docs/crd.md)."""
