"""Self-layer refresh: the self blocks other than identity, rewritten from the active memories."""
