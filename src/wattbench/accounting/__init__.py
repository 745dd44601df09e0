"""The only place energy is computed: counter deltas, integration, idle baseline, windows, boundaries, validity, prefill/decode attribution."""
