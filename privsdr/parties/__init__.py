"""The party engine: parties that run a protocol by messages, each process holding its own rows (issue 34).

``layout`` (the parties and their columns), ``messages`` (versioned messages and the mailbox folder), ``engine`` (the
protocol hooks, the session that charges each release write-ahead and hands the party a noise ticket, the runner in
one process, on executors or on Dask) and ``party_process`` (one party as its own process, through the mailbox). It
knows no algorithm: DP-BCD and PRIDE (``privsdr.vertical``) implement its hooks, and import-linter checks that it never
imports them. Seeds and executors come from ``privsdr.execution``, shared with the horizontal protocol.
"""
