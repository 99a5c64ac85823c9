"""Rules: one per file, registered automatically."""
