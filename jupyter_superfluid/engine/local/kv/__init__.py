"""The KV tiers: resident cells, host memory and disk, and the prefix cache over them.

``prefix_cache`` (``PrefixCache``: which slot holds which tokens, and where a prompt
goes), ``state`` (one sequence's KV as bytes, out of and back into a context),
``memory_tier`` (parked states in host memory, and what saving and restoring costs),
``disk_tier`` (kept conversations' states as files, written off the token loop),
``disk_file`` (one state file's format and checks) and ``prefix_index`` (hashed-block
look-ups that stay cheap at thousands of states).
"""
