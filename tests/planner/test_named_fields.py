"""`model` and `hardware` are the two fields nothing is searched over: `unknown` there is one error line naming
the field and what is allowed (ninth new-user trial: "unknown hardware 'unknown'" named no field)."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from planner.cli import app


@pytest.mark.parametrize(
    ("field", "other", "allowed"),
    [
        ("hardware", "model: deepseek-v3", "planner catalog hardware"),
        ("model", "hardware: h200-sxm", "planner catalog models"),
    ],
)
def test_an_unknown_model_or_hardware_names_the_field(tmp_path, field, other, allowed):
    path = tmp_path / "s.yaml"
    path.write_text(f"{field}: unknown\n{other}\n")
    out = CliRunner().invoke(app, ["estimate", str(path)])
    assert out.exit_code == 2
    line = out.output.strip()
    assert "\n" not in line
    assert f"{field}: cannot be unknown" in line
    assert allowed in line
