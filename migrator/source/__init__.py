"""The MySQL side: connections and their read-only UTC session, drivers, the live schema,
and rows read in keyset batches. Never writes to MySQL."""
