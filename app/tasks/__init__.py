"""Background asyncio work: preemption tasks and (leader only) PodsReady evictions."""
