"""The softmax saturation studies (`make saturation`): the runs they train and the tables they compute without
training. The read-back of a finished study (its tables, figures and findings) is `analysis.saturation`.

    settings            the sizes of each study in a named setting (quick, full)
    runs                the plan of training runs and `run`: what `attnlab saturation` calls
    tables              study A at initialisation and study D's fading with length, computed without training
    normaliser_weights  each normaliser's weights and Jacobian on drawn dot products, for study A's tables

    >>> from experiments import saturation
    >>> setting = saturation.setting_named("quick")
    >>> len(saturation.plan(setting))  # the training runs of studies B, C and D
"""

from experiments.saturation.runs import default_workers, plan, run
from experiments.saturation.settings import SETTINGS, Setting, setting_named

__all__ = ["SETTINGS", "Setting", "default_workers", "plan", "run", "setting_named"]
