"""A softmax saturation study's read-back, written into its folder: tables/*.csv, figures/*.png and
findings.md (`write`), what `make saturation` leaves after its runs. The tables come from
`analysis.saturation.study`, the figures from `analysis.saturation.figures`, the findings from
`analysis.saturation.findings`.

    >>> from analysis.saturation import readback
    >>> readback.write("runs/saturation/quick")
"""

from __future__ import annotations

import io
from pathlib import Path

import pandas as pd

from analysis.report import figures as style
from analysis.report.render import md_escape
from analysis.saturation.figures import figures
from analysis.saturation.findings import findings
from analysis.saturation.study import SaturationStudy, learning_speed, load, normaliser_dynamics
from common.files import atomic_write_bytes, atomic_write_text


def tables(study: SaturationStudy) -> dict[str, pd.DataFrame]:
    """The derived tables saved under tables/, by file name."""
    return {"dynamics": study.dynamics, "steps_to_accuracy": study.steps_to_accuracy,
            "learning_speed": learning_speed(study), "normaliser_dynamics": normaliser_dynamics(study),
            "learning_rates": study.learning_rates,
            "lengths": study.lengths}


def findings_markdown(study: SaturationStudy) -> str:
    """findings.md: the findings, then the pieces skipped; every string escaped for Markdown, since run
    folder names and the reasons read from them may hold markup."""
    lines = [f"# Softmax saturation: setting {md_escape(study.name)}", "",
             *(f"- {md_escape(finding)}" for finding in findings(study))]
    if study.skipped:
        lines += ["", "## Skipped", "",
                  *(f"- {md_escape(entry['run'])}: {md_escape(entry['reason'])}" for entry in study.skipped)]
    return "\n".join(lines) + "\n"


def write(study_dir: str | Path) -> list[Path]:
    """tables/*.csv, figures/*.png and findings.md into the study folder, each file replaced atomically;
    returns the paths written."""
    study_dir = Path(study_dir)
    study = load(study_dir)
    written = []
    for name, table in tables(study).items():
        path = study_dir / "tables" / f"{name}.csv"
        atomic_write_text(path, table.to_csv(index=False))
        written.append(path)
    with style.style():
        for name, _, fig, _ in figures(study):
            buffer = io.BytesIO()
            fig.savefig(buffer, format="png", dpi=style.DPI)
            path = study_dir / "figures" / f"{name}.png"
            atomic_write_bytes(path, buffer.getvalue())
            written.append(path)
    path = study_dir / "findings.md"
    atomic_write_text(path, findings_markdown(study))
    return [*written, path]


__all__ = ["findings_markdown", "tables", "write"]
