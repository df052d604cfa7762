"""`discover`: the pools of a consuming cluster as the Global Router finds them.

`find` is pure (the router's rules over the slices read); `view` reads them and shows
them (below the commands: `dev --clusters 2` ends with its table too); `command` is the
command: its options, `--pool` and exit codes.
"""
