"""The night's frame: the step registry, the frame one step runs in, one anima's night, the
runner, the pool, guards and revert. The steps themselves are in steps/ (docs/architecture.md)."""
