"""Planning, pure: rows (bytes as MySQL prints them) -> the Redis commands they need, or the
same as RESP bytes on the hot path; the structure registry; value encoding; the memory
estimate. Imports only ``migrator.mapping``."""
