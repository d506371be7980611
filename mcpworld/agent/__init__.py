"""The agent: policies, tool-call formats, the episode loop, trajectories, runs and best-of-N."""
