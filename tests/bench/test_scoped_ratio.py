"""``python -m bench.scoped_ratio``: the scoped-search bar checked on one host, on a store
loaded before, beside the naive scan of the same run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from bench.loading import load
from bench.workload import Workload

from bench import scoped_ratio


@pytest.fixture(scope="module")
def store(tmp_path_factory: pytest.TempPathFactory) -> Path:
    data_dir = tmp_path_factory.mktemp("scoped")
    load(data_dir, Workload(), 400, 1)
    return data_dir


def test_each_round_prints_both_searches_and_the_ratio_of_their_p95(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    arguments = [str(store), "--queries", "30", "--naive-queries", "5", "--rounds", "2"]
    assert scoped_ratio.main(arguments) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert [line["round"] for line in lines] == [0, 1]
    for line in lines:
        assert line["items"] == 400
        ours, naive = line["ours_ms"], line["naive_ms"]
        assert 0 < ours["p50_ms"] <= ours["p95_ms"] <= ours["p99_ms"]
        assert 0 < naive["p50_ms"] <= naive["p95_ms"]
        # from the unrounded figures, to a tenth
        ratio = naive["p95_ms"] / ours["p95_ms"]
        assert line["naive_p95_over_ours"] == pytest.approx(ratio, rel=0.01, abs=0.06)
        assert line["paged_in_mib"] > 0  # our file was read into the page cache first


def test_a_smaller_count_searches_the_first_items_only(
    store: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert scoped_ratio.main([str(store), "--items", "200", "--queries", "10"]) == 0
    (line,) = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert line["items"] == 200


@pytest.mark.parametrize("items", ["0", "401"])
def test_more_items_than_were_loaded_or_none_are_refused_in_one_line(
    store: Path, items: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        scoped_ratio.main([str(store), "--items", items])
    assert refused.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert "--items must be between 1 and the 400 items loaded" in message


@pytest.mark.parametrize("option", ["--queries", "--naive-queries", "--rounds"])
@pytest.mark.parametrize("value", ["0", "-3", "many"])
def test_counts_that_are_not_at_least_one_are_refused_in_one_line(
    store: Path, option: str, value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as refused:
        scoped_ratio.main([str(store), option, value])
    assert refused.value.code == 2
    message = capsys.readouterr().err.strip().splitlines()[-1]
    assert f"argument {option}:" in message


def test_a_folder_without_a_loaded_store_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        scoped_ratio.main([str(tmp_path)])
    assert "no loaded store" in capsys.readouterr().err
