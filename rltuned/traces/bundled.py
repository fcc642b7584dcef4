"""The real traces shipped in `rltuned/data/traces/` (sources and licenses: docs/data.md), by short name.

`itp` is cluster 04, the largest bundled ITP cluster (15,802 jobs); clusters 07 and 08 are held back
for independent evaluation and are not shipped.
"""

from __future__ import annotations

from pathlib import Path

DATA_DIR = Path(__file__).resolve().parent.parent / "data" / "traces"

_ITP_CLUSTERS = ("01", "02", "03", "04", "05", "06", "09", "10")
_BUNDLED: dict[str, str] = {
    "philly": "philly.csv.xz",
    "itp": "itp/cluster04.csv.xz",
    **{f"itp-{n}": f"itp/cluster{n}.csv.xz" for n in _ITP_CLUSTERS},
    "openb": "openb/openb_pod_list_default.csv.xz",
    "hpc2n": "swf/hpc2n.swf.xz",
    "nasa": "swf/NASA-iPSC-1993-3.1-cln.swf.xz",
    "wagap": "swf/wagap-2013.swf.xz",
}


def bundled_names() -> list[str]:
    return list(_BUNDLED)


def resolve_trace(name_or_path: str) -> Path:
    """The bundled file for a short name; anything else is taken as a path (checked when loaded)."""
    bundled = _BUNDLED.get(name_or_path)
    return DATA_DIR / bundled if bundled is not None else Path(name_or_path)
