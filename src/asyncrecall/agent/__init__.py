"""The agent client: turns, tools, reminders, limits and the memory prefetch."""
