"""Source against Redis: rows, unique and index structures, references, counters, latest
lists and stale keys, table by table, into a ``VerifyReport``."""
