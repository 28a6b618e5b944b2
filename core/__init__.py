"""What every domain app and every door shares. It imports no domain app and no door, so anything
may import it."""
