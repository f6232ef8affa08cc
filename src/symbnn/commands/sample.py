"""`symbnn sample METHOD OUT --experiment NAME`: one method's samples outside the workflow."""

from __future__ import annotations

import shutil
from pathlib import Path

import yaml

from symbnn.commands import setting_option
from symbnn.config_code import check_imports
from symbnn.device import resolve_device
from symbnn.methods.registry import METHOD_NAMES, check_variant
from symbnn.settings import Config, Methods, config_from_mapping, load_config


def _parse_override(text: str) -> tuple[str, object]:
    if "=" not in text:
        raise ValueError(f"--set {text!r}: expected KEY=VALUE (e.g. rate=0.5)")
    key, value = text.split("=", 1)
    try:
        return key.strip(), yaml.safe_load(value)
    except yaml.YAMLError as exc:
        problem = getattr(exc, "problem", None) or "not valid YAML"
        raise ValueError(f"--set {text!r}: the value is {problem}") from None


def _configured(args):
    """The config file's settings with the command line's changes, checked again."""
    data = load_config(args.config).to_dict()  # the code it names is checked by _run
    if args.experiment not in data["experiments"]:
        raise ValueError(
            f"{args.config}: no experiment {args.experiment!r} "
            f"(defined: {', '.join(data['experiments'])})"
        )
    methods = data["experiments"][args.experiment]["methods"]
    if methods is None:
        raise ValueError(f"{args.config}: experiments.{args.experiment} has no `methods` section")
    if args.method not in methods and args.method not in METHOD_NAMES:
        raise ValueError(
            f"METHOD {args.method!r}: neither a shipped method ({', '.join(METHOD_NAMES)}) "
            f"nor one that experiments.{args.experiment}.methods names by import path"
        )
    methods[args.method] = methods.get(args.method) or {}
    changes = []
    for text in args.set or []:
        key, value = _parse_override(text)
        methods[args.method][key] = value
        changes.append(f"--set {text}")
    if args.n_samples is not None:
        methods["n_samples"] = args.n_samples
        changes.append(f"--n-samples {args.n_samples}")
    # a value the command line changed is not on a line of the file: name the options
    source = f"{args.config} with {' '.join(changes)}" if changes else args.config
    return config_from_mapping(data, source)


def _run(args) -> int:
    # local: keeps torch, zarr out of the command line's start
    from symbnn.methods.sampling import problem_for, sample_store

    # local: keeps polars, torch, zarr out of the command line's start
    from symbnn.posterior import convergence_table, gather_shards, train_shard

    config = _configured(args)
    check_imports(config, [args.experiment], args.config)
    experiment = config.experiments[args.experiment]
    methods = experiment.methods
    try:
        check_variant(args.method, args.variant, methods)
    except ValueError as exc:
        raise ValueError(f"--variant {args.variant}: {exc}") from None
    pool = Path(args.pool or Path(config.results) / args.experiment / "modes" / "pool.zarr")
    if not pool.exists():
        print(f"no pool store at {pool}: training its {methods.pool} networks first")
        shard = pool.with_name(pool.name + ".shard")
        train_shard(
            shard,
            args.experiment,
            experiment.data,
            experiment.model.to_dict(),
            experiment.recipe,
            methods.pool_seeds,
            data_root=config.data_root,
            download=config.download,
            device=args.device,
        )
        gather_shards([shard], pool)
        shutil.rmtree(shard)
    _check_pool(pool, experiment)
    posterior = experiment.posterior
    table = convergence_table(pool, posterior.min_accuracy, posterior.max_below_median)
    converged = table.filter(table["converged"])["row"].to_list()
    problem = problem_for(
        experiment.data,
        experiment.model.to_dict(),
        experiment.recipe,
        config.data_root,
        config.download,
        args.device,
        float(table["threshold"][0]),
        experiment.methods.retries,
    )
    store = sample_store(
        args.output,
        args.experiment,
        experiment,
        args.method,
        args.variant,
        pool,
        converged,
        problem,
    )
    print(f"wrote {store}")
    if args.predictions:
        # local: keeps torch out of the command line's start
        from symbnn.data.experiment import load_in_distribution, load_out_of_distribution

        # local: keeps torch, zarr out of the command line's start
        from symbnn.predictions import open_predictions, write_predictions

        _, test = load_in_distribution(
            experiment.data, config.data_root, config.download, experiment.model.to_dict()
        )
        ood = load_out_of_distribution(experiment.data, config.data_root, test, config.download)
        write_predictions(
            args.output, args.predictions, test, ood, device=resolve_device(args.device)
        )
        accuracy = open_predictions(args.predictions).read("test_accuracy")
        print(
            f"predictions written: {args.predictions} (sample test accuracy "
            f"{accuracy.min():.4f} .. {accuracy.max():.4f})"
        )
    return 0


def _check_pool(pool: Path, experiment) -> None:
    """The pool must hold networks of the experiment's architecture."""
    # local: keeps zarr out of the command line's start
    from symbnn.store import StoreError, open_store

    found = open_store(pool).architecture
    if found != experiment.model.to_dict():
        raise StoreError(
            f"{pool}: the pool holds {found} networks, the experiment's model is "
            f"{experiment.model.to_dict()}; pass a pool of the experiment (--pool)"
        )


def register(subparsers) -> None:
    parser = subparsers.add_parser(
        "sample",
        help="draw one posterior approximation's weight samples for an experiment (docs/maths.md, section 4)",
    )
    parser.add_argument(
        "method",
        metavar="METHOD",
        help=f"one of {', '.join(METHOD_NAMES)}, or a method the experiment names by import path",
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
    parser.add_argument(
        "--n-samples", **setting_option(Methods, "n_samples"), help="override methods.n_samples"
    )
    parser.add_argument(
        "--pool",
        help="pool store of trained modes (default: RESULTS/NAME/modes/pool.zarr; "
        "trained first when missing)",
    )
    parser.add_argument("--predictions", help="also write the samples' test/OOD predictions here")
    parser.add_argument(
        "--device",
        **setting_option(Config, "device"),
        help="where to compute: auto (GPU if present), cpu, cuda or cuda:N (default: %(default)s)",
    )
    parser.set_defaults(handler=_run)
