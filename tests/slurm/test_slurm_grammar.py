"""The two string grammars Slurm prints: GRES/TRES-per-X items and hostlists."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from rltuned.slurm.gres import GpuRequest, Gres, gpus_of, node_gpus, parse_gres
from rltuned.slurm.hostlist import compress, expand


@pytest.mark.parametrize(
    ("text", "items"),
    [
        ("gpu:p100:4", (Gres("gpu", "p100", 4),)),
        ("gpu:4(S:0)", (Gres("gpu", None, 4),)),
        ("gpu:a100:4(S:0-1),shard:8", (Gres("gpu", "a100", 4), Gres("shard", None, 8))),
        ("gpu:p100:2(IDX:0-1)", (Gres("gpu", "p100", 2),)),
        ("gpu:tesla:3(IDX:0,2-3)", (Gres("gpu", "tesla", 3),)),  # the comma is inside the parentheses
        ("gpu:(null):0(IDX:N/A)", (Gres("gpu", None, 0),)),
        ("gres:gpu:p100:2", (Gres("gpu", "p100", 2),)),
        ("gres/gpu:a100=2", (Gres("gpu", "a100", 2),)),
        ("gres/gpu=2", (Gres("gpu", None, 2),)),
        ("gpu:no_consume:2", (Gres("gpu", None, 2),)),
        ("mps:1K", (Gres("mps", None, 1024),)),
        ("gpu", (Gres("gpu", None, 1),)),
        ("gpu:a100", (Gres("gpu", "a100", 1),)),
        ("", ()),
        ("(null)", ()),
        ("N/A", ()),
    ],
)
def test_parse_gres(text: str, items: tuple[Gres, ...]) -> None:
    assert parse_gres(text) == items


@pytest.mark.parametrize("text", ["gpu:a:b:2", "gpu:p100:-2", "gpu=x", ":2", "gpu#:2"])
def test_parse_gres_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        parse_gres(text)


@pytest.mark.parametrize(
    ("text", "wanted"),
    [
        ("gres:gpu:p100:3", GpuRequest(3, "p100")),
        ("gres:gpu:2", GpuRequest(2, None)),
        ("gres/gpu=2,gres/gpu:a100=2", GpuRequest(2, "a100")),  # TRES total plus typed count
        ("gres:gpu:0", GpuRequest(0, None)),
        ("gres:shard:2", GpuRequest(0, None)),
        ("", GpuRequest(0, None)),
    ],
)
def test_gpus_of(text: str, wanted: GpuRequest) -> None:
    assert gpus_of(text) == wanted


def test_gpus_of_rejects_two_models_and_inconsistent_totals() -> None:
    with pytest.raises(ValueError, match="one GPU model"):
        gpus_of("gres:gpu:a100:1,gres:gpu:v100:1")
    with pytest.raises(ValueError, match="untyped GPU total"):
        gpus_of("gres/gpu=3,gres/gpu:a100=2")


def test_node_gpus_sums_models_under_the_first() -> None:
    assert node_gpus("gpu:a100:4(S:0),gpu:a100_1g.5gb:7(S:1)") == GpuRequest(11, "a100")
    assert node_gpus("shard:8") == GpuRequest(0, None)


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("p100-1", ("p100-1",)),
        ("p100-[1-2]", ("p100-1", "p100-2")),
        ("p100-[1-2],k80-[01-03,5]", ("p100-1", "p100-2", "k80-01", "k80-02", "k80-03", "k80-5")),
        ("gpu[9-11]", ("gpu9", "gpu10", "gpu11")),
        ("r[1-2]n[1-2]", ("r1n1", "r1n2", "r2n1", "r2n2")),
        ("", ()),
        ("(null)", ()),
    ],
)
def test_expand(text: str, names: tuple[str, ...]) -> None:
    assert expand(text) == names


@pytest.mark.parametrize("text", ["n[1-", "n1]", "n[a-b]", "n[3-1]", "n[[1]]", "a,,b", "n[1-99999999]"])
def test_expand_rejects(text: str) -> None:
    with pytest.raises(ValueError, match="expected"):
        expand(text)


def test_compress() -> None:
    assert compress(["p100-1", "p100-2", "k80-1"]) == "p100-[1-2],k80-1"
    assert compress(["n01", "n02", "n03", "n05", "login"]) == "n[01-03,05],login"
    assert compress([]) == ""


@given(
    st.lists(
        st.tuples(st.sampled_from(["gpu", "p100-", "rack1-n", "x"]), st.integers(0, 120), st.integers(1, 3)),
        max_size=30,
    )
)
def test_compress_then_expand_gives_the_names(parts: list[tuple[str, int, int]]) -> None:
    names = list(dict.fromkeys(f"{prefix}{number:0{width}d}" for prefix, number, width in parts))
    assert sorted(expand(compress(names))) == sorted(names)
