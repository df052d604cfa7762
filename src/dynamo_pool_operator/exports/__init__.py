"""Pool exports through the Multi-Cluster Services API (SPEC §4)."""
