"""The `type` of each kind of log entry (SPEC §15.3, §16.2): the site writes them, and the
verifier and the local MCP server read them, so all three name them from here (`core.amalgam`
builds this module into both served files, so it imports nothing)."""

TASK = "cairn.log/task"
CONTRIBUTION = "cairn.log/contribution"
EVALUATION = "cairn.log/evaluation"
RESTART = "cairn.log/restart"
