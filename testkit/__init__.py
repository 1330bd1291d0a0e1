"""Helpers that both the tests (anima_pipeline_tests/) and the benchmarks (benchmarks/) use:
the fake Messages API, synthetic archive data and the evaluation data's location, `dg dev` for
a UI run, a scripted Claude night. Neither side owns them, so neither imports the other
(test_code_health.py checks it). Not shipped in the wheel."""
