"""The Redis side: connections, pipelined writers for one server and for a Cluster, and the
checkpoints a run keeps in Redis."""
