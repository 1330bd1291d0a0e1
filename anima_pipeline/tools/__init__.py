"""The memory tool contract: every tool as a pydantic model, the executor that validates,
scopes, applies and audits each call, and the scope of a step."""
