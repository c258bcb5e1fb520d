"""``kernbench calibrate``: fit config parameters to measured figures, or check an overlay (kernbench.calibrate,
docs/calibrate.md)."""

from __future__ import annotations

import argparse
import sys

from kernbench.runner import DEFAULT_SEED, check_seed


def add_parser(sub) -> None:
    c = sub.add_parser("calibrate", help="fit config parameters to measured figures, or --check an overlay")
    c.add_argument("--data", required=True, metavar="FILE", help="measured-data file (.yaml or .csv; docs/calibrate.md)")
    c.add_argument("--free", action="append", default=[], metavar="PATH=LO..HI",
                   help='a free parameter and its bounds in the key\'s units, e.g. k200.compute.fc_overhead="1 us..50 us" '
                        "(repeatable)")
    c.add_argument("--fit-on", default=None, metavar="GROUPS",
                   help="comma list of the groups fitted on (default: all); the other groups are predictions")
    c.add_argument("--cv-by", default="group", metavar="KEY",
                   help="cross-validation: group (leave one fitted group out, default), row, none, or a parameter "
                        "of the rows' calls (e.g. batch: leave one batch out)")
    c.add_argument("--check", default=None, metavar="OVERLAY",
                   help="recompute the errors with OVERLAY applied, without refitting; exit 1 when a row is "
                        "outside its tolerance")
    c.add_argument("--config", default=None, help="machine config (default: each measurement function's own)")
    c.add_argument("--set", dest="sets", action="append", default=[], metavar="PATH=VALUE",
                   help="override a config value for every row (repeatable); it goes into the overlay")
    c.add_argument("--functions", action="append", default=[], metavar="FILE.py",
                   help="a Python file registering measurement functions with @measurement (repeatable)")
    c.add_argument("--tolerance", default=None, metavar="T",
                   help="tolerance of rows that name none (0.05 or '5 %%'; default: fitted 5 %%, predicted 20 %%)")
    c.add_argument("--out", default=None, help="output folder (default: out/calibrate, --check: nothing written)")
    c.add_argument("--loss", default="soft_l1", choices=["linear", "soft_l1", "huber", "cauchy", "arctan"],
                   help="robust loss of scipy.optimize.least_squares (default soft_l1)")
    c.add_argument("--f-scale", type=float, default=0.1, help="residual scale of the loss, in log error (default 0.1)")
    c.add_argument("--diff-step", type=float, default=1e-2,
                   help="finite-difference step on the [0, 1]-scaled parameters (default 1e-2: wider than the "
                        "simulator's small steps)")
    c.add_argument("--max-nfev", type=int, default=None, help="most fit iterations (default 60 x (parameters + 1))")
    c.add_argument("--seed", type=int, default=DEFAULT_SEED, help=f"random seed (default {DEFAULT_SEED})")
    c.add_argument("--no-plots", action="store_true", help="write no PNGs")
    c.add_argument("--quiet", action="store_true", help="print only the output paths")


def run(args: argparse.Namespace) -> int:
    from kernbench import calibrate as cal
    from kernbench.atomic_output import check_output_dir, hold_output_dir
    from kernbench.calibrate.data import parse_tolerance

    check_seed(args.seed)
    for name, v in (("--f-scale", args.f_scale), ("--diff-step", args.diff_step)):
        if not (v > 0 and v < 1e6):
            raise cal.CalibrationError(f"{name} {v}: must be a positive number")
    if args.max_nfev is not None and args.max_nfev <= 0:
        raise cal.CalibrationError(f"--max-nfev {args.max_nfev}: must be > 0")
    try:
        tol = None if args.tolerance is None else parse_tolerance(args.tolerance)
    except ValueError as e:
        raise cal.CalibrationError(f"--tolerance: {e}") from None
    out = args.out if args.out is not None else (None if args.check else "out/calibrate")
    check_output_dir(out, "--out")
    with hold_output_dir(out, "--out"):  # the whole command, as run and sweep hold theirs
        return _calibrate(args, out, tol)


def _calibrate(args: argparse.Namespace, out, tol) -> int:
    import shlex

    from kernbench import calibrate as cal
    from kernbench.config import config_overrides

    sets = dict(config_overrides(args.sets))
    for f in args.functions:
        cal.load_functions(f)
    words = ["kernbench", "calibrate", "--data", args.data]
    for flag, vals in (("--free", args.free), ("--set", args.sets), ("--functions", args.functions)):
        for v in vals:
            words += [flag, v]
    for flag, v in (("--fit-on", args.fit_on), ("--check", args.check), ("--config", args.config),
                    ("--tolerance", args.tolerance), ("--out", args.out)):
        if v is not None:
            words += [flag, v]
    if args.cv_by != "group":
        words += ["--cv-by", args.cv_by]
    command = shlex.join(words)
    if args.check:
        res = cal.check(args.check, args.data, config=args.config, sets=sets, tolerance=tol, command=command)
    else:
        if args.free and args.fit_on is not None and not args.fit_on.strip():
            raise cal.CalibrationError("--fit-on: empty (give a comma list of groups)")
        fit_on = None if args.fit_on is None else args.fit_on.split(",")
        res = cal.calibrate(args.data, args.free, fit_on, config=args.config, sets=sets, seed=args.seed,
                            cv_by=args.cv_by, loss=args.loss, f_scale=args.f_scale, diff_step=args.diff_step,
                            tolerance=tol, max_nfev=args.max_nfev, command=command)
    written = cal.write_outputs(res, out, plots=not args.no_plots) if out is not None else {}
    if not args.quiet:
        from kernbench.calibrate.roles import result_lines

        print("\n".join(result_lines(res)))
    for path in written.values():
        print(f"wrote {path}")
    if args.check:
        if not res["ok"]:
            print(f"kernbench: {len(res['outside'])} row(s) outside their tolerance: {', '.join(res['outside'])}",
                  file=sys.stderr)
        return 0 if res["ok"] else 1
    return 0
