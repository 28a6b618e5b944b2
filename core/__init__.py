"""What every domain app and every door shares: errors and codes, clock, canonical JSON, payload
helpers, cursors, lookups, the privacy screen, outages, metrics, logs, policy numbers and the version.

It imports no domain app and no door, so anything may import it."""
