"""`discover`: the pools of a consuming cluster as the Global Router finds them.

`find` is pure (the router's rules over the slices read); `command` reads and prints.
"""
