"""Deep sleep: four rounds over the active semantic memories (contradictions and expiry,
splits, merges, pin review)."""
