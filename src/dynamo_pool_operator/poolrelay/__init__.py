"""The DynamoPoolRelay controller: publish and withdraw a pool's relay (SPEC §3)."""
