"""sync: the stage that keeps Redis in step with the binary log — its coordinator, the first
load, the follow loop, online snapshots, schema tracking, recovery and failover, and what it
shows a supervisor (figures, lag, health, the exporter)."""
