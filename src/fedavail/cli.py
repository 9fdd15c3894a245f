"""`fedavail <stage> ...`: the one entry point every Snakemake rule calls. Rules hold no logic; stages talk only
through files."""

import argparse
import functools
import json
import logging
import os
import sys
import time
from pathlib import Path

from fedavail.plan.experiments import DEVICE, ExecutionOptions

log = logging.getLogger(__name__)


def _spec(text: str, many: bool = False) -> dict | list[dict]:
    """--spec: a JSON object, or with `many` a non-empty JSON list of them (train-seeds)."""
    try:
        spec = json.loads(text)
    except json.JSONDecodeError as error:
        raise argparse.ArgumentTypeError(f"--spec is not valid JSON: {error}") from error
    if many and not (isinstance(spec, list) and spec and all(isinstance(s, dict) for s in spec)):
        raise argparse.ArgumentTypeError("--spec must be a non-empty JSON list of objects, one run spec per seed")
    if not many and not isinstance(spec, dict):
        raise argparse.ArgumentTypeError("--spec must be a JSON object")
    return spec


def cmd_prepare(args) -> None:
    from fedavail.data.prepare import prepare
    from fedavail.data.prepared import save_prepared

    save_prepared(args.out, prepare(args.dataset, args.raw_dir, args.spec))


def cmd_download(args) -> None:
    from fedavail.data.download import fetch
    from fedavail.integrity import file_sha256
    from fedavail.io import write_json

    files = fetch(args.dataset, args.raw_dir, allow_network=not args.offline)
    for path in files:
        log.info("verified %s", path)
    # The manifest marks the raw folder as verified: the prepare rule depends on it, not on the archives' names. Its
    # sha256 record the download; the prepare rule compares the files' current ones (fedavail.data.raw_digests).
    write_json(args.manifest, {"dataset": args.dataset,
                               "files": {p.name: {"size": p.stat().st_size, "sha256": file_sha256(p)} for p in files}})


def cmd_partition(args) -> None:
    from fedavail.data.prepared_labels import load_train_labels
    from fedavail.io import atomic_path
    from fedavail.partitions.partition import make_partition, partition_stats, plot_partition, save_partition

    labels = load_train_labels(args.prepared)
    spec = {k: v for k, v in args.spec.items() if k != "dataset"}
    partition = make_partition(labels.train_y, labels.num_classes, spec, args.seed, groups=labels.train_groups)
    save_partition(args.out, partition)
    with atomic_path(args.stats) as tmp:
        partition_stats(partition).to_csv(tmp, index=False)
    plot_partition(partition, args.figure)


def cmd_trace(args) -> None:
    from fedavail.availability.traces import make_trace, plot_trace, save_trace
    from fedavail.partitions.partition import load_partition

    partition = load_partition(args.partition) if args.partition else None
    spec = {k: v for k, v in args.spec.items() if k not in ("num_clients", "rounds", "partition")}
    num_clients = args.spec.get("num_clients") or partition.num_clients
    trace = make_trace(spec, num_clients, args.spec["rounds"], args.seed, partition)
    save_trace(args.out, trace)
    plot_trace(trace, args.figure)


def cmd_convert_device_record(args) -> None:
    """A device record (FedScale's pickle, numpy numbers included, or a table) read as the workflow reads it, and
    written as the Parquet table of the same content: a safe, columnar way in for real FedScale files."""
    from fedavail.availability import device_records

    if args.kind == "availability":
        record = device_records.read_online_record(args.source)
        device_records.write_interval_table(args.out, record)
        log.info("%s: %d clients, %d online sessions -> %s", args.source, len(record.clients), len(record.starts),
                 args.out)
    else:
        capacity = device_records.read_device_capacity(args.source)
        device_records.write_capacity_table(args.out, capacity)
        log.info("%s: %d clients' capacities -> %s", args.source, len(capacity.clients), args.out)


def cmd_train(args) -> int:
    """`train` (one run) and `train-seeds` (several runs in one process: fedavail.train.run_together)."""
    if args.gpu_slots is not None:
        # Before anything imports torch: CUDA reads CUDA_VISIBLE_DEVICES once, when it initialises.
        from fedavail.gpu_slots import claim

        claim(args.gpu_slots, args.device)
    from fedavail.train import DeviceUnavailable, Execution, RunInputs, check_device, run_together

    try:
        check_device(args.device)
    except DeviceUnavailable as error:
        raise SystemExit(f"fedavail {args.stage}: --device {error}; use --device auto or cpu") from None
    entries = [args.partition, args.trace, args.out_dir, args.spec]
    if args.stage == "train":
        entries = [[entry] for entry in entries]
    elif len({len(entry) for entry in entries}) > 1:
        raise SystemExit(f"fedavail train-seeds: --partition, --trace and --out-dir need one entry per spec "
                         f"({len(args.spec)}); got {len(args.partition)}, {len(args.trace)} and {len(args.out_dir)}")
    batched = {"true": True, "false": False}.get(args.batched.lower(), args.batched)
    execution = Execution(args.threads, args.device, batched, args.checkpoint_every, args.log_every)
    results = run_together(args.prepared, [RunInputs(*entry) for entry in zip(*entries)], execution)
    # A preempted run exits non-zero so the scheduler retries it; the retry resumes from the checkpoint.
    return 3 if any("stopped_at" in result for result in results) else 0


def _device(text: str) -> str:
    if not DEVICE.fullmatch(text):
        raise argparse.ArgumentTypeError(f"{text!r} is not auto, cpu, cuda or cuda:N")
    return text


def _output(text: str) -> tuple[str, Path]:
    key, sep, path = text.partition("=")
    if not sep or not key or not path:
        raise argparse.ArgumentTypeError(f"--out takes KEY=PATH, got {text!r}")
    return key, Path(path)


def cmd_report(args) -> None:
    from fedavail.report.build import make_report

    make_report(args.spec, args.run_dirs, dict(args.out))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fedavail", description=__doc__)
    parser.add_argument("-v", "--verbose", action="store_true")
    stages = parser.add_subparsers(dest="stage", required=True)
    _add_data_stages(stages)
    _add_train_stages(stages)
    report = stages.add_parser("report", help="one report job: an experiment's table and figure, a `reports:` "
                               "table or figure, or the frame of every run")
    report.add_argument("--spec", type=_spec, required=True, help="the report job's spec (JSON)")
    report.add_argument("--run-dirs", type=Path, nargs="*", default=[])
    report.add_argument("--out", type=_output, nargs="+", required=True, help="KEY=PATH for every output")
    report.set_defaults(func=cmd_report)
    return parser


def _add_data_stages(stages) -> None:
    """The stages before training: download, prepare, partition, trace, and converting a device record."""
    download = stages.add_parser("download", help="fetch and verify a paper dataset's archives")
    download.add_argument("dataset")
    download.add_argument("--raw-dir", type=Path, required=True)
    download.add_argument("--offline", action="store_true", help="never use the network; verify placed files")
    download.add_argument("--manifest", type=Path, required=True, help="JSON record of the verified files")
    download.set_defaults(func=cmd_download)

    prepare = stages.add_parser("prepare", help="turn a dataset into one compact tensor file")
    prepare.add_argument("dataset")
    prepare.add_argument("--raw-dir", type=Path, default=None)
    prepare.add_argument("--out", type=Path, required=True)
    prepare.add_argument("--spec", type=_spec, default={})
    prepare.set_defaults(func=cmd_prepare)

    partition = stages.add_parser("partition", help="split a prepared dataset over clients")
    partition.add_argument("--prepared", type=Path, required=True)
    partition.add_argument("--stats", type=Path, required=True)
    partition.set_defaults(func=cmd_partition)
    trace = stages.add_parser("trace", help="draw who is available in every round")
    trace.add_argument("--partition", type=Path, default=None)
    trace.set_defaults(func=cmd_trace)
    for stage in (partition, trace):
        stage.add_argument("--seed", type=int, required=True)
        stage.add_argument("--spec", type=_spec, required=True)
        stage.add_argument("--out", type=Path, required=True)
        stage.add_argument("--figure", type=Path, required=True)

    convert = stages.add_parser("convert-device-record", help="read a device record (FedScale's client_behave_trace "
                                "or client_device_capacity pickle, or a table) safely and write it as a Parquet "
                                "table (docs/recorded-availability.md)")
    convert.add_argument("kind", choices=["availability", "capacity"])
    convert.add_argument("source", type=Path)
    convert.add_argument("--out", type=Path, required=True, help="the Parquet table to write")
    convert.set_defaults(func=cmd_convert_device_record)


def _add_train_stages(stages) -> None:
    """`train` (one run) and `train-seeds` (several runs in one process), their execution options defaulting to the
    config's `execution` defaults."""
    train = stages.add_parser("train", help="one run: an algorithm, a seed, an experiment's settings")
    train_seeds = stages.add_parser("train-seeds", help="several runs of the same settings in one process (their "
                                                        "clients batched together); the same outputs as train")
    defaults = ExecutionOptions()  # the config's `execution` defaults
    for stage, many in ((train, None), (train_seeds, "+")):
        one_each = "one per spec, in its order" if many else None
        stage.add_argument("--prepared", type=Path, required=True)
        stage.add_argument("--partition", type=Path, nargs=many, required=True, help=one_each)
        stage.add_argument("--trace", type=Path, nargs=many, required=True, help=one_each)
        stage.add_argument("--out-dir", type=Path, nargs=many, required=True, help=one_each)
        stage.add_argument("--spec", type=functools.partial(_spec, many=True) if many else _spec, required=True,
                            help="JSON list of the runs' specs" if many else None)
        stage.add_argument("--threads", type=int, default=defaults.train_threads)
        stage.add_argument("--device", type=_device, default=defaults.device,
                           help="auto (CUDA when present), cpu, cuda, cuda:N")
        stage.add_argument("--batched", default=str(defaults.batched),
                           choices=["auto", "true", "false", "True", "False"],
                           help="vmap over clients (auto: as fedavail.engine.backend measured it)")
        stage.add_argument("--checkpoint-every", type=int, default=defaults.checkpoint_every)
        stage.add_argument("--log-every", type=int, default=defaults.log_every)
        stage.add_argument("--gpu-slots", type=Path, default=None, metavar="DIR",
                           help="with several GPUs visible, lock one device per concurrent job via slot files in DIR "
                                "and set CUDA_VISIBLE_DEVICES to it (see fedavail.gpu_slots)")
        stage.set_defaults(func=cmd_train)


def _log_time(stage: str, event: str, main_started: float) -> None:
    """A command's first and last log lines: benchmarks/job_accounting.py adds them up over a run's job logs. Seconds
    count from the process's start (interpreter start-up included), known from Linux's /proc."""
    try:
        stat = Path("/proc/self/stat").read_text()
    except OSError:
        log.info("%s %s %.2f s after main() started (process start time unknown)", stage, event,
                 time.perf_counter() - main_started)
        return
    # Field 22, the start time in clock ticks since boot; fields are counted from after the command name's ")".
    started_ticks = int(stat.rsplit(")", 1)[1].split()[19])
    seconds = time.clock_gettime(time.CLOCK_BOOTTIME) - started_ticks / os.sysconf("SC_CLK_TCK")
    log.info("%s %s %.2f s after its process started", stage, event, seconds)


def main(argv: list[str] | None = None) -> int:
    main_started = time.perf_counter()
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.DEBUG if args.verbose else logging.INFO,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)
    _log_time(args.stage, "started", main_started)
    code = args.func(args) or 0
    _log_time(args.stage, "finished", main_started)
    if argv is None:
        # The stage's files are written and closed: skip the interpreter's teardown (~0.5 s a process with torch
        # loaded, ~0.07 s with matplotlib), paid by every job. The kernel releases locks (fedavail.gpu_slots) anyway.
        logging.shutdown()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == "__main__":
    sys.exit(main())
