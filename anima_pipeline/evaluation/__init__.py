"""Measurements of the memory system on public benchmarks (LoCoMo)."""
