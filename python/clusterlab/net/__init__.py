"""Socket and host TCP tuning, and reading TCP_INFO / nstat counters."""
