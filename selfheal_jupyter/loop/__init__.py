"""The loop's room: planner → developer → QA, bounded and cancellable; it knows nothing of IPython, HTML or widgets and emits typed events."""
