"""PHOLD on SimPy 4, the same model as the C++ engines, for the side-by-side rate.

Each initially pending event is a token process hopping from LP to LP after
exponential delays (integer picoseconds, mean ``mean_delay_ps``), exactly
like ``src/sim/models/phold.cpp``; only the random stream differs.
"""

from __future__ import annotations

import random
import time


def run_simpy_phold(lps: int, events_per_lp: int, events: int, mean_delay_ps: int, seed: int) -> dict:
    """Process ``events`` PHOLD events on SimPy; returns events and events/s of the run loop."""
    import simpy

    env = simpy.Environment()
    rng = random.Random(seed)
    rate = 1.0 / mean_delay_ps
    done = env.event()
    processed = 0
    # Locals bound once: SimPy gets the same care as the C++ loops.
    timeout, expovariate, randrange = env.timeout, rng.expovariate, rng.randrange

    def token(lp: int):
        nonlocal processed
        yield timeout(round(expovariate(rate)))
        while True:
            processed += 1
            if processed == events:
                done.succeed()
            lp = randrange(lps)  # the next LP (drawn to match the model's work)
            yield timeout(round(expovariate(rate)))

    for lp in range(lps):
        for _ in range(events_per_lp):
            env.process(token(lp))
    env.run(until=1)  # start every token, as the C++ coroutine engine does before timing
    start_count = processed
    t0 = time.perf_counter()
    env.run(until=done)
    wall = time.perf_counter() - t0
    n = processed - start_count
    return {"engine": "simpy", "events": n, "wall_s": wall, "events_per_s": n / wall if wall > 0 else 0.0}
