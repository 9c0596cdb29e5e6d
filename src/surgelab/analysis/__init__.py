"""From records to numbers: percentiles, throughput, goodput, Little's Law, thresholds."""
