"""Pool exports through the Multi-Cluster Services API (docs/exports.md)."""
