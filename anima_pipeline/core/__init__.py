"""What every layer shares: the error hierarchy, the step keys, the input rules of every door
and the citation marker. Nothing here imports the rest of the package."""
