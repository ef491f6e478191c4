"""The softmax saturation studies read back: a study folder that `make saturation` wrote -> tables, figures and
findings, each computed from what the folder holds, never typed in.

    study                 the folder read into tables (`load`, `SaturationStudy`) and what is derived from them
    figures               the seaborn figures drawn from those tables
    findings              the sentences that state their numbers; study D's synthetic ones in `fading_findings`,
                          the other normalisers' (studies A and B) in `normaliser_findings`
    text                  how numbers are written, in the findings, the figures and the report alike
    readback              `write`: tables/*.csv, figures/*.png and findings.md into the study folder

    >>> from analysis import saturation
    >>> study = saturation.load("runs/saturation/quick")   # tables
    >>> saturation.write("runs/saturation/quick")          # tables, figures, findings.md

The report's "Softmax saturation" section is `analysis.report.sections.saturation`; the runs and the tables computed
without training are `experiments.saturation`.
"""

from analysis.saturation.readback import write
from analysis.saturation.study import SaturationStudy, load, study_folder

__all__ = ["SaturationStudy", "load", "study_folder", "write"]
