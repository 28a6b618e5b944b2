"""What every domain app and every door shares; it imports neither, so anything may import it."""
