"""Results of a claim's runs given by hand, for the tests of its rule (`test_claim_rules`) and of the claims'
framework (`test_claims`)."""

from analysis.claims import Results


class Fake(Results):
    """Results from figures given by hand: {(part, variant, task): {seed: value}}, the same for every figure."""

    def __init__(self, figures, capacity=None, chance=0.1, size=2432.0):
        super().__init__({})
        self.figures, self.points, self.chance_value, self.size = figures, capacity or {}, chance, size

    def test(self, part, variant, task):
        return self.figures.get((part, variant, task), {})

    def figure(self, part, variant, task, read):
        return self.test(part, variant, task)

    def capacity(self, part, variant, task, axis, value):
        return self.points.get((part, variant, task, axis, value), {})

    def chance(self, part, variant, task, point=None):
        return self.chance_value

    def test_size(self, part, task):
        return self.size


def seeds(*values):
    return dict(enumerate(values, start=1))
