"""Memory-ref-sync: the citations of the day counted, re-pointed and decayed; the resident set."""
