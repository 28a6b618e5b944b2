"""The names a payload carries, which the site checks and its served files write (`core.amalgam`
builds this module into them): each payload's schema and the scope its approval must name (SPEC
§6), the evaluation's schema and rule (§4.3), and the codes a sealed report is void with (§15.8)."""

OPEN_TASK_SCHEMA = "cairn.open_task/0.1"
CONTRIBUTION_SCHEMA = "cairn.task.contribution/0.1"
OPEN_TASK_SCOPE = "this_open_task"
CONTRIBUTION_SCOPE = "this_contribution"
EVALUATION_SCHEMA = "cairn.evaluation/0.1"
RULE = "cairn.rules/0.1"
KEYS_UNAVAILABLE = "keys_unavailable"
INCONSISTENT_SHARES = "inconsistent_shares"
