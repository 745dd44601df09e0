"""Planning from measurements: roofline bounds, rack density, power-first design, TCO, hardware table.

Every planner is a plain library function (no printing); ``wattbench plan …`` is a thin CLI over them.
"""
