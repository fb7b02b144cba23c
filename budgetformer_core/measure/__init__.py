"""Measuring cost and uncertainty: the CPU timer, analytic FLOPs, the structural-execution
benchmark, the latency of shipped models against their dense reference, bootstrap intervals."""
