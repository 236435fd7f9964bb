"""The memory folder, scanning, selectors and recall. Knows nothing of the agent."""
