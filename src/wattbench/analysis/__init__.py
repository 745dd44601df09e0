"""Compare, regression gate and diagnosis rules, output agreement (and, from other issues, Pareto and roofline)."""
