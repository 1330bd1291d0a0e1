"""The agent side: the facade a running agent uses (`AnimaMemory`), forgetting, the Markdown
export and the pre-compaction flush."""
