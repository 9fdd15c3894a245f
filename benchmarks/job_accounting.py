"""Job accounting of a finished workflow run: how much of all job time is spent outside training loops.

    python benchmarks/job_accounting.py [RUN_DIR] [--snakemake-log PATH ...]

Reads RUN_DIR's Snakemake log (by default the newest one in RUN_DIR/.snakemake/log that ran jobs) for the jobs of
the run and their log files, then each job's log for the lines every `fedavail` command writes (fedavail.cli):

    ... INFO fedavail.cli: trace started 0.05 s after its process started
    ... INFO fedavail.cli: trace finished 0.59 s after its process started

and, for training, the round loop's line (fedavail.train): `... INFO fedavail.train: round loop: 17.52 s`. A job's
time is its process's, from the process's start (interpreter and imports included) to the end of its command.
Prints a Markdown table per rule: jobs, job time, time before main() (interpreter start-up and `import
fedavail.cli`), time inside round loops, time outside them (start-up, loading, set-up, writing), and that time's
share of all job time. Exits non-zero, naming what is missing, when the run is incomplete or a job's log lacks
these lines. Several --snakemake-log files (e.g. a run resumed after an interruption) are read in order; a job run
again in a later one counts once, with its last log."""

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path

JOB_HEADER = re.compile(r"^(?:local)?rule (\S+):$")
JOB_FIELD = re.compile(r"^    (\w+): (.*)$")
STEPS = re.compile(r"^(\d+) of (\d+) steps \(.*\) done$")
STAGE_TIME = re.compile(r": (\S+) (started|finished) ([0-9.]+) s after its process started$")
ROUND_LOOP = re.compile(r": round loop: ([0-9.]+) s$")


class AccountingError(Exception):
    pass


@dataclass
class Job:
    rule: str
    log: str
    before_main: float = 0.0  # seconds from process start to the command's first line
    seconds: float = 0.0  # from process start to the command's last line
    in_loops: float = 0.0  # inside round loops (training jobs)

    @property
    def outside_loops(self) -> float:
        return self.seconds - self.in_loops


def newest_snakemake_log(run_dir: Path) -> Path:
    """The newest Snakemake log of `run_dir` that ran jobs (dry runs and lint checks write logs of none)."""
    logs = sorted((run_dir / ".snakemake" / "log").glob("*.snakemake.log"), reverse=True)
    for path in logs:
        if any(JOB_HEADER.match(line) for line in path.read_text().splitlines()):
            return path
    raise AccountingError(f"no Snakemake log of a run that ran jobs in {run_dir / '.snakemake' / 'log'}; "
                          "pass the run folder, or --snakemake-log")


def jobs_of(snakemake_log: Path) -> tuple[dict[str, str], list[str]]:
    """The jobs a Snakemake log ran, as {job log path: rule}, and the rules of those without a log (rule all)."""
    logged, unlogged, job, last_steps = {}, [], None, None
    for line in snakemake_log.read_text().splitlines():
        if job is not None:
            field = JOB_FIELD.match(line)
            if field:
                job[field[1]] = field[2]
                continue
            if "log" in job:
                logged[job["log"].split(", ")[0]] = job["rule"]
            else:
                unlogged.append(job["rule"])
            job = None
        header = JOB_HEADER.match(line)
        if header:
            job = {"rule": header[1]}
        last_steps = STEPS.match(line) or last_steps
    if last_steps is None or last_steps[1] != last_steps[2]:
        done = "no step" if last_steps is None else f"{last_steps[1]} of {last_steps[2]} steps"
        raise AccountingError(f"the run of {snakemake_log} is incomplete ({done} done): finish it first")
    return logged, unlogged


def read_job(run_dir: Path, log: str, rule: str) -> Job:
    path = run_dir / log
    if not path.is_file():
        raise AccountingError(f"{path} is missing")
    job = Job(rule, log)
    events = {}
    for line in path.read_text(errors="replace").splitlines():
        stage = STAGE_TIME.search(line)
        if stage:
            events[stage[2]] = float(stage[3])
        loop = ROUND_LOOP.search(line)
        if loop:
            job.in_loops += float(loop[1])
    if "finished" not in events:
        raise AccountingError(f"{path} has no line 'finished ... s after its process started': the job failed, or "
                              "ran a fedavail that does not log its times (or not on Linux)")
    job.before_main, job.seconds = events.get("started", 0.0), events["finished"]
    return job


def account(run_dir: Path, snakemake_logs: list[Path]) -> tuple[list[Job], list[str]]:
    """Every job of the run, timed from its log, and the rules of the jobs without a log."""
    rules, unlogged = {}, []
    for snakemake_log in snakemake_logs:
        logged, untimed = jobs_of(snakemake_log)
        rules.update(logged)
        unlogged += untimed
    jobs, problems = [], []
    for log, rule in rules.items():
        try:
            jobs.append(read_job(run_dir, log, rule))
        except AccountingError as error:
            problems.append(str(error))
    if problems:
        shown = "\n  ".join(problems[:10])
        more = f"\n  ... and {len(problems) - 10} more" if len(problems) > 10 else ""
        raise AccountingError(f"{len(problems)} of {len(rules)} jobs cannot be timed:\n  {shown}{more}")
    if not jobs:
        raise AccountingError(f"no job with a log in {', '.join(map(str, snakemake_logs))}")
    return jobs, unlogged


def table(jobs: list[Job]) -> str:
    total = sum(j.seconds for j in jobs)
    by_rule: dict[str, list[Job]] = {}
    for job in jobs:
        by_rule.setdefault(job.rule, []).append(job)
    lines = ["| rule | jobs | job time (s) | per job (s) | before main() (s) | in round loops (s) "
             "| outside round loops (s) | outside loops, share of all job time |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]

    def row(name: str, group: list[Job]) -> str:
        seconds = sum(j.seconds for j in group)
        outside = sum(j.outside_loops for j in group)
        return (f"| {name} | {len(group)} | {seconds:.2f} | {seconds / len(group):.2f} | "
                f"{sum(j.before_main for j in group):.2f} | {sum(j.in_loops for j in group):.2f} | {outside:.2f} | "
                f"{outside / total:.1%} |")

    for rule, group in sorted(by_rule.items(), key=lambda item: -sum(j.outside_loops for j in item[1])):
        lines.append(row(rule, group))
    lines.append(row("**all jobs**", jobs))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("run_dir", type=Path, nargs="?", default=Path("."), help="the workflow's folder (default: .)")
    parser.add_argument("--snakemake-log", type=Path, action="append",
                        help="a Snakemake log of the run; repeat for a run made by several invocations")
    args = parser.parse_args(argv)
    try:
        snakemake_logs = args.snakemake_log or [newest_snakemake_log(args.run_dir)]
        jobs, unlogged = account(args.run_dir, snakemake_logs)
    except AccountingError as error:
        print(f"job_accounting: {error}", file=sys.stderr)
        return 1
    total = sum(j.seconds for j in jobs)
    outside = sum(j.outside_loops for j in jobs)
    print(f"Jobs of {', '.join(map(str, snakemake_logs))}: {len(jobs)} timed"
          + (f", {len(unlogged)} without a log ({', '.join(sorted(set(unlogged)))}) not timed" if unlogged else "")
          + ".\n")
    print(table(jobs))
    print(f"\nOutside training loops: {outside:.1f} s of {total:.1f} s of job time ({outside / total:.1%}).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
