"""Wall-clock timing of a peer's call, shared by the bench/ scripts (alma times itself)."""
import time


def time_samples(fn, min_runs, min_time, warmup=3, cap=100000):
    """Calls fn `warmup` times, then until it has run at least min_runs times AND for min_time
    seconds (at most `cap` samples); returns each timed call's latency in ms."""
    for _ in range(warmup):
        fn()
    samples, t_end = [], time.perf_counter() + min_time
    while (len(samples) < min_runs or time.perf_counter() < t_end) and len(samples) < cap:
        t0 = time.perf_counter()
        fn()
        samples.append((time.perf_counter() - t0) * 1e3)
    return samples
