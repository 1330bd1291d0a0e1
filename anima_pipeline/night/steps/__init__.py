"""One folder per step or step family of the night, each holding its orchestration (step.py),
its offline plan (plan.py) and what the plan needs."""
