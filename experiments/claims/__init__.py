"""The runs of the published claims (`make reproduce`): each part of a claim is a benchmark, trained by the benchmark's
machinery. The claims themselves, what they state and the rules that read their verdicts from the records, are
`analysis.claims`.

    parts     what a claim trains: its parts (`Runs`), the benchmark each part is, and which parts are not trained
    training  the parts trained (or their cost estimated), and each settled one kept as a record
"""
