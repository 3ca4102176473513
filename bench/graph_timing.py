"""Timing a captured CUDA graph from Python, shared by the benchmark scripts: warm replays, then
a CUDA event between consecutive replays, on the current stream."""

import statistics

import torch


def median_replay_us(graph, reps, warmups):
    """Median µs of one replay of `graph` over `reps` replays after `warmups` untimed ones."""
    for _ in range(warmups):
        graph.replay()
    events = [torch.cuda.Event(enable_timing=True) for _ in range(reps + 1)]
    events[0].record()
    for i in range(reps):
        graph.replay()
        events[i + 1].record()
    torch.cuda.synchronize()
    return statistics.median(1000 * events[i].elapsed_time(events[i + 1]) for i in range(reps))
