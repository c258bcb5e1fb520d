"""`kernbench show` lays out explicit graphs so that no edge hides: a 4-chip ring is drawn as a ring (its wraparound
edge visible), and on a star, a switch box and a ring no edge passes over a node it does not join."""
from __future__ import annotations

import math

import pytest

from kernbench import System
from kernbench.config import validate
from kernbench.show import node_positions


def ring_yaml(n: int) -> str:
    nodes = "".join(f"    - {{name: c{i}, kind: pe, overhead: 1 ns}}\n" for i in range(n))
    edges = "".join(f"    - {{a: c{i}, b: c{(i + 1) % n}, bandwidth: 200 GB/s, latency: 100 ns, class: ring}}\n"
                    for i in range(n))
    return "graph:\n  nodes:\n" + nodes + "  edges:\n" + edges


def star_yaml(n: int) -> str:
    nodes = "    - {name: sw, kind: switch, overhead: 1 ns}\n" + "".join(
        f"    - {{name: g{i}, kind: pe, overhead: 1 ns}}\n" for i in range(n))
    edges = "".join(f"    - {{a: g{i}, b: sw, bandwidth: 100 GB/s, latency: 100 ns, class: link}}\n" for i in range(n))
    return "graph:\n  nodes:\n" + nodes + "  edges:\n" + edges


def seg_distance(p, a, b) -> float:
    """Distance from point p to the inside of the segment a-b (infinite when p projects onto its first or last
    5 %: a node beside another's end is not on the edge)."""
    ax, ay = a
    bx, by = b
    dx, dy = bx - ax, by - ay
    t = ((p[0] - ax) * dx + (p[1] - ay) * dy) / (dx * dx + dy * dy)
    if not 0.05 < t < 0.95:
        return math.inf
    return math.hypot(p[0] - (ax + t * dx), p[1] - (ay + t * dy))


def layout(path):
    system = System.load(str(path))
    pos = node_positions(system, validate(str(path), []))
    ch = system.channels()
    edges = {tuple(sorted((int(a), int(b)))) for a, b in zip(ch["src"], ch["dst"])}
    return pos, edges


def hidden(pos, edges) -> list[tuple]:
    """(edge, node) pairs where a node lies on an edge it is not an end of (within 2 % of the drawing's size: its
    marker would cover the line)."""
    xs = [p[0] for p in pos.values()]
    ys = [p[1] for p in pos.values()]
    size = max(max(xs) - min(xs), max(ys) - min(ys))
    return [(e, v) for e in edges for v in pos if v not in e and seg_distance(pos[v], pos[e[0]], pos[e[1]]) < 0.02 * size]


@pytest.mark.parametrize("make,name", [(ring_yaml, "ring4"), (ring_yaml, "ring8"), (star_yaml, "star6")])
def test_no_edge_hides(tmp_path, make, name):
    """On rings of 4 and 8 chips and a 6-leaf star no node lies on an edge it does not join; on a ring every node
    is at the same distance from the centre (drawn as a ring, not a line folding onto itself)."""
    n = int(name[-1])
    cfg = tmp_path / f"{name}.yaml"
    cfg.write_text(make(n))
    pos, edges = layout(cfg)
    assert len(pos) == len(edges) + (1 if make is star_yaml else 0)
    assert hidden(pos, edges) == []
    if make is ring_yaml:
        cx = sum(p[0] for p in pos.values()) / n
        cy = sum(p[1] for p in pos.values()) / n
        radii = [math.hypot(p[0] - cx, p[1] - cy) for p in pos.values()]
        assert max(radii) - min(radii) < 0.05 * max(radii), radii


def test_the_h100_box_draws_without_a_hidden_edge():
    """The shipped H100 box (8 GPUs joined to 4 NVSwitches, plus its host side) has no node drawn on an edge it
    does not join, and the layout is the same on every call (deterministic)."""
    from kernbench.system import config_path
    path = config_path("machines/h100-8x-nvswitch.yaml")
    pos, edges = layout(path)
    assert hidden(pos, edges) == []
    assert layout(path)[0] == pos
