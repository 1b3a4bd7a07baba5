"""The manifest's expansion helpers on their own (pure functions)."""

from __future__ import annotations

from eq_tui.manifest.expand import (
    UndefinedVariable,
    describe_point,
    grid_points,
    grid_size,
    render_args,
    scalar_text,
    substitute,
)


def test_booleans_are_written_as_yaml_writes_them() -> None:
    assert (scalar_text(True), scalar_text(False), scalar_text(0.10)) == ("true", "false", "0.1")
    assert render_args({"flags": [True, False, 3]}) == "--flags true false 3"


def test_the_grid_size_is_the_product_of_its_lists() -> None:
    assert grid_size({}) == 1
    assert grid_size({"a": ["1", "2", "3"], "b": ["x", "y"]}) == 6
    assert grid_size({"a": ["1", "2"], "b": []}) == 0
    assert len(grid_points({"a": ["1", "2", "3"], "b": ["x", "y"]})) == 6


def test_a_grid_point_is_described_key_by_key() -> None:
    assert describe_point({"lr": "0.1", "seed": "2"}) == "lr=0.1, seed=2"


def test_an_undefined_variable_names_itself() -> None:
    try:
        substitute("run ${nope}", {})
    except UndefinedVariable as exc:
        assert exc.name == "nope" and str(exc) == "nope"
    else:
        raise AssertionError("no error for an undefined variable")
