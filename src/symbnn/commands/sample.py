"""`symbnn sample METHOD OUT --experiment NAME`: one method's samples outside the workflow."""

from __future__ import annotations

import copy
import shutil
from pathlib import Path

import yaml


def _parse_override(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise ValueError(f"--set {text!r}: expected KEY=VALUE (e.g. rate=0.5)")
    key, value = text.split("=", 1)
    return key.strip(), yaml.safe_load(value)


def _run(args) -> int:
    from symbnn.config import ConfigError, load_config, validate_config
    from symbnn.methods.registry import check_variant
    from symbnn.methods.sampling import sample_mode_store
    from symbnn.posterior import gather_shards, train_shard

    config = load_config(args.config)
    if args.experiment not in config["experiments"]:
        raise ValueError(
            f"{args.config}: no experiment {args.experiment!r} "
            f"(defined: {', '.join(config['experiments'])})"
        )
    config = copy.deepcopy(config)
    experiment = config["experiments"][args.experiment]
    if "methods" not in experiment:
        raise ValueError(f"{args.config}: experiments.{args.experiment} has no `methods` section")
    methods = experiment["methods"]
    methods.setdefault(args.method, {})
    for text in args.set or []:
        key, value = _parse_override(text)
        methods[args.method][key] = value
    if args.n_samples is not None:
        methods["n_samples"] = args.n_samples
    try:
        validate_config(config, args.config)
    except ConfigError as exc:
        raise ValueError(str(exc)) from None
    check_variant(args.method, args.variant)

    pool = Path(
        args.pool
        or Path(config.get("results", "results")) / args.experiment / "modes" / "pool.zarr"
    )
    if not pool.exists():
        print(f"no pool store at {pool}: training its {methods['pool']} networks first")
        first = methods.get("first_seed", 1_000_000)
        shard = pool.with_name(pool.name + ".shard")
        train_shard(
            shard,
            args.experiment,
            experiment,
            range(first, first + methods["pool"]),
            data_root=config.get("data_root", "data"),
            device=args.device,
        )
        gather_shards([shard], pool)
        shutil.rmtree(shard)
    store = sample_mode_store(
        args.output,
        args.experiment,
        experiment,
        args.method,
        args.variant,
        None,
        pool,
        data_root=config.get("data_root", "data"),
        device=args.device,
    )
    print(f"wrote {store}")
    if args.predictions:
        from symbnn.device import resolve_device
        from symbnn.posterior import load_in_distribution, load_out_of_distribution
        from symbnn.predictions import open_predictions, write_predictions

        _, test = load_in_distribution(experiment["data"], config.get("data_root", "data"))
        ood = load_out_of_distribution(experiment["data"], config.get("data_root", "data"), test)
        write_predictions(
            args.output, args.predictions, test, ood, device=resolve_device(args.device)
        )
        accuracy = open_predictions(args.predictions).read("test_accuracy")
        print(
            f"predictions written: {args.predictions} (sample test accuracy "
            f"{accuracy.min():.4f} .. {accuracy.max():.4f})"
        )
    return 0


def register(subparsers) -> None:
    from symbnn.methods.registry import METHOD_NAMES

    parser = subparsers.add_parser(
        "sample",
        help="draw one posterior approximation's weight samples for an experiment (SPEC section 4)",
    )
    parser.add_argument(
        "method", metavar="METHOD", choices=METHOD_NAMES, help=f"one of {', '.join(METHOD_NAMES)}"
    )
    parser.add_argument("output", metavar="OUT", help="sample store to write")
    parser.add_argument("--experiment", required=True, help="experiment of the config file")
    parser.add_argument(
        "--config", default="config.yaml", help="workflow config (default: config.yaml)"
    )
    parser.add_argument(
        "--variant",
        choices=("single", "multi"),
        default="multi",
        help="single mode, or the modes of methods.modes (default: multi)",
    )
    parser.add_argument(
        "--set",
        action="append",
        metavar="KEY=VALUE",
        help="override one of the method's settings (repeatable), e.g. --set rate=0.5",
    )
    parser.add_argument("--n-samples", type=int, help="override methods.n_samples")
    parser.add_argument(
        "--pool",
        help="pool store of trained modes (default: RESULTS/NAME/modes/pool.zarr; "
        "trained first when missing)",
    )
    parser.add_argument("--predictions", help="also write the samples' test/OOD predictions here")
    parser.add_argument("--device", default="auto", choices=("auto", "cpu", "cuda"))
    parser.set_defaults(handler=_run)
