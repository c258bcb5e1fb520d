"""Figures of noc-load-latency: latency-load curves (buffered vs unbounded) and tree saturation."""

from __future__ import annotations


def _name(buf, vcs):
    return "unbounded" if buf == "unbounded" else f"{buf} x{vcs}vc"


def plot_curves(ctx, rows, saturation):
    """One figure per mesh: a panel per pattern, mean latency (cycles) against offered load
    (flits/node/cycle), one line per buffer setting; dashed: the channel-load bound."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    for mesh in dict.fromkeys(r["mesh"] for r in rows):
        mr = [r for r in rows if r["mesh"] == mesh]
        patterns = list(dict.fromkeys(r["pattern"] for r in mr))
        fig, axes = plt.subplots(1, len(patterns), figsize=(4.2 * len(patterns), 3.8), squeeze=False)
        for ax, pattern in zip(axes[0], patterns):
            pr = [r for r in mr if r["pattern"] == pattern]
            for setting in dict.fromkeys((r["buffer"], r["vcs"]) for r in pr):
                rs = sorted((r for r in pr if (r["buffer"], r["vcs"]) == setting), key=lambda r: r["offered_flits"])
                style = "k-o" if setting[0] == "unbounded" else "-o"
                ax.plot([r["offered_flits"] for r in rs], [r["mean_latency_cycles"] for r in rs], style,
                        ms=3, lw=1.2, label=_name(*setting))
            bound = pr[0]["bound_flits"]
            ax.axvline(bound, ls="--", lw=0.8, color="grey")
            for s in saturation:
                if s["mesh"] == mesh and s["pattern"] == pattern and s["saturation"]:
                    ax.plot([s["saturation"]], [s["zero_load_latency_cycles"] * 3], "x", color="grey", ms=4)
            ax.set_yscale("log")
            ax.set_title(f"{mesh} {pattern} (bound {bound:.3f})")
            ax.set_xlabel("offered load (flits/node/cycle)")
            ax.grid(alpha=0.3)
        axes[0][0].set_ylabel("mean packet latency (cycles)")
        axes[0][-1].legend(fontsize=7)
        fig.tight_layout()
        ctx.save_figure(fig, f"load_latency_{mesh}.png")
        plt.close(fig)


def plot_tree(ctx, rows):
    """Victim latency against the hotspot load, one line per buffer setting."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5.5, 4))
    for setting in dict.fromkeys((r["buffer"], r["vcs"]) for r in rows):
        rs = sorted((r for r in rows if (r["buffer"], r["vcs"]) == setting), key=lambda r: r["offered_flits"])
        ax.plot([r["offered_flits"] for r in rs], [r["mean_latency_cycles"] for r in rs],
                "k-o" if setting[0] == "unbounded" else "-o", ms=3, label=_name(*setting))
    ax.axvline(rows[0]["bound_flits"], ls="--", lw=0.8, color="grey")
    ax.set_yscale("log")
    ax.set_xlabel("hotspot load per source (flits/node/cycle; dashed: hotspot ejection bound)")
    ax.set_ylabel("victim mean latency (cycles)")
    ax.set_title(f"tree saturation on {rows[0]['mesh']}: a victim that avoids the hotspot")
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    ctx.save_figure(fig, "tree_saturation.png")
    plt.close(fig)
