"""Arrival schedules, the async streaming client, worker processes, sweeps and adaptive search."""
