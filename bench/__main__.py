"""``python -m bench``: run the benchmarks and write ``bench/results/<date>.{json,md}``."""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from bench import config
from bench.run import RunOptions, run


def _parser() -> argparse.ArgumentParser:
    """The command line."""
    p = argparse.ArgumentParser(prog="python -m bench", description=__doc__)
    p.add_argument("--tiny", action="store_true", help="the tiny model, one repetition")
    p.add_argument("--reps", type=int, help="measured repetitions per point (rates too)")
    p.add_argument(
        "--scenario",
        action="append",
        choices=config.SCENARIOS,
        help="run only this scenario (repeatable); default: all",
    )
    p.add_argument("--out-dir", type=Path, default=config.RESULTS_DIR)
    p.add_argument("--stem", help="output file name without suffix (default: the date)")
    p.add_argument(
        "--no-llama-cpp-server", action="store_true", help="skip python -m llama_cpp.server"
    )
    p.add_argument(
        "--with-llama-server",
        action="store_true",
        help="build llama.cpp's C++ llama-server (cached) and compare with it",
    )
    p.add_argument("--keep-workdir", action="store_true", help="keep server logs and stores")
    return p


def main(argv: list[str] | None = None) -> None:
    """Parse the command line and run."""
    args = _parser().parse_args(argv)
    cfg = config.tiny() if args.tiny else config.full()
    if args.reps:
        from dataclasses import replace

        cfg = replace(cfg, reps=args.reps, rate_reps=args.reps, warm_reps=args.reps)
    binary = None
    if args.with_llama_server:
        from jupyter_superfluid.engine.remote.build import ensure_llama_server

        binary = ensure_llama_server()
    argv_text = shlex.join(sys.argv[1:] if argv is None else argv)
    options = RunOptions(
        cfg=cfg,
        scenarios=tuple(args.scenario or config.SCENARIOS),
        command=f"python -m bench {argv_text}".strip(),
        out_dir=args.out_dir,
        stem=args.stem,
        llama_cpp_server=not args.no_llama_cpp_server,
        llama_server_binary=binary,
        keep_workdir=args.keep_workdir,
    )
    json_path, md_path = run(options)
    print(md_path.read_text())
    print(f"wrote {json_path} and {md_path}", file=sys.stderr)


if __name__ == "__main__":
    main()
