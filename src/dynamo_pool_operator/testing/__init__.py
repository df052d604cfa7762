"""Test and dev support: the real local control plane and its assets."""
