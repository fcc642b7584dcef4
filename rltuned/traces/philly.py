"""Microsoft Philly, as the job-level CSV of the Pollux/Sia simulators (`timestamp,duration,num_gpus,...`).

The file has no job id, user, start time or GPU type: `name` is the row's line number (so a job can be
found again with `sed -n Np`), `account` is the virtual cluster, and `user` stays empty. Timestamps are
the cluster's wall clock, read as UTC.
"""

from __future__ import annotations

from pathlib import Path

from rltuned.domain import Job
from rltuned.traces.base import RowPolicy, Trace, open_text
from rltuned.traces.fields import Parsed, collect, count, csv_table, nonnegative, timestamp

FORMAT = "philly"
COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")


def load(path: Path, lenient: bool) -> Trace:
    policy = RowPolicy(path, lenient)
    with open_text(path) as handle:
        columns, rows = csv_table(path, handle, COLUMNS)
        at_submit, at_duration, at_gpus, at_vc = (columns[name] for name in COLUMNS)

        def parse(line: int, row: list[str], job_id: int) -> Parsed:
            runtime = nonnegative(row[at_duration], "duration")
            gpus = count(row[at_gpus], "num_gpus")
            submit = timestamp(row[at_submit], "timestamp")
            if gpus == 0:
                return "cpu_only"
            if runtime == 0:
                return "zero_duration"
            return Job(job_id, submit, gpus, runtime, name=str(line), account=row[at_vc])

        jobs = collect(policy, rows, parse, len(columns))
    return policy.finish(FORMAT, jobs)
