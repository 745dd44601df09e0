"""Compare, regression gate, diagnosis rules, output agreement, Pareto frontier."""
