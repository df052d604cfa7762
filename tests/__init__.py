"""The test tiers, a package: fixture modules are imported by their package path."""
