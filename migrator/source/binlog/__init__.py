"""The binary-log reader that sync follows: the replication stream read, framed, checksummed and
unpacked (``stream``), table maps cached and rows events cut in place (``tables``), rows decoded
(``rows``) and their values encoded (``values``), transactions, DDL and heartbeats assembled
(``reader``), in a child process by default (``process``); the server settings it needs
(``settings``) and the events it stops on rather than misread (``guard``); GTID states and
MySQL's executed sets (``gtid``, ``gtid_set``); a lost connection surfaced once (``reconnect``).

Imports nothing on its own: each caller imports the module it needs."""
