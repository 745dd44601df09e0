"""Latency and throughput statistics, goodput under SLOs, efficiency figures, confidence intervals."""
