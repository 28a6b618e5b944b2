"""The HTTP API door (SPEC §7, §9, §12): DRF views that parse the query or body into the payload
models, call a service or a selector, and turn a refusal into a SPEC §6 answer. It imports the core
and the domain apps, never another door."""
