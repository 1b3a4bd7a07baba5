"""`eq-tui init --cmd`: a brace list left open is refused, not taken as one literal job (issue
46)."""

from __future__ import annotations

from pathlib import Path

import pytest

from eq_tui.cli.init import split_braces
from eq_tui.cli.main import main
from eq_tui.errors import UsageError


@pytest.mark.parametrize("command", ["python t.py --lr {0.1,0.03 --seed {1..3}",
                                     "python t.py --seed {1..3", "python t.py --lr {0.1, 0.03}"])
def test_an_unclosed_brace_list_is_refused(command: str) -> None:
    with pytest.raises(UsageError, match="without its closing"):
        split_braces(command)


def test_braces_that_are_no_list_stay_as_they_are() -> None:
    grid = split_braces("awk '{print $1}' f --home ${HOME} --lr {1e-3,3e-4}")
    assert grid.variables == {"lr": ["1e-3", "3e-4"]}


def test_init_refuses_it_with_exit_2_and_writes_nothing(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "eq-tui.yaml"
    assert main(["init", "--cmd", "python t.py --lr {0.1,0.03", "-o", str(path)]) == 2
    assert "`{0.1,0.03`" in capsys.readouterr().err
    assert not path.exists()
