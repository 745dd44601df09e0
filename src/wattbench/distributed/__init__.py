"""Scale-out on Ray: load-generator actors spread over a cluster, one sensor actor per metered
node, per-node clock offsets, and one merged result (docs/scaling.md).

Nothing here imports ``ray`` at module level: ``ray`` is imported inside the functions that
need it, so ``wattbench`` works without the ``ray`` extra until ``--ray`` is used. The entry
points are ``wattbench.distributed.run.run_distributed_level`` and ``RayCluster``.
"""
