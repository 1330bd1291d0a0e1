"""Review mode (docs/review.md): a night's destructive operations kept as proposals, approved
or rejected afterwards."""
