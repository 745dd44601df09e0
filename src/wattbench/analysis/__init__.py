"""Compare, regression gate and diagnosis rules, Pareto frontier, roofline."""
