"""The HTTP API door (SPEC §7, §9, §12): DRF views that parse the wire into the payload models and
call a service or a selector; `http_api.errors` turns a refusal into a SPEC §6 answer."""
