"""One pool's relay and its exports: gather, plan purely, execute, report.

The walk of one relay key is in docs/architecture.md.
"""
