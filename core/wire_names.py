"""The names a payload carries, which the site checks and its served files write: each payload's
schema and the scope its approval must name (SPEC §6). The verifier and the local MCP server are
built with this module's text in them (`core.amalgam`)."""

OPEN_TASK_SCHEMA = "cairn.open_task/0.1"
CONTRIBUTION_SCHEMA = "cairn.task.contribution/0.1"
OPEN_TASK_SCOPE = "this_open_task"
CONTRIBUTION_SCOPE = "this_contribution"
