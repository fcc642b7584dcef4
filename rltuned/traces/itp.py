"""Microsoft ITP clusters (ElasticFlow's raw traces, 2021): `job_id,submission_time,duration,num_gpu`.

Submission times are seconds from the start of collection. There is no user, virtual cluster, GPU type
or time limit, so those fields stay empty.
"""

from __future__ import annotations

from pathlib import Path

from rltuned.domain import Job
from rltuned.traces.base import RowPolicy, Trace, open_text
from rltuned.traces.fields import Parsed, collect, count, csv_table, nonnegative, number

FORMAT = "itp"
COLUMNS = ("job_id", "submission_time", "duration", "num_gpu")


def load(path: Path, lenient: bool) -> Trace:
    policy = RowPolicy(path, lenient)
    with open_text(path) as handle:
        columns, rows = csv_table(path, handle, COLUMNS)
        at_id, at_submit, at_duration, at_gpus = (columns[name] for name in COLUMNS)

        def parse(line: int, row: list[str], job_id: int) -> Parsed:
            submit = number(row[at_submit], "submission_time")
            runtime = nonnegative(row[at_duration], "duration")
            gpus = count(row[at_gpus], "num_gpu")
            if gpus == 0:
                return "cpu_only"
            if runtime == 0:
                return "zero_duration"
            return Job(id=job_id, submit=submit, gpus=gpus, runtime=runtime, name=row[at_id])

        jobs = collect(policy, rows, parse, len(columns))
    return policy.finish(FORMAT, jobs)
