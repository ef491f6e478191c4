"""The benchmark read back from its storage or its record (`make benchmark`'s page, its blocks in docs/results.md and
the README). The modules, by job:

    page              the page, reports/benchmark-<name>/: the leaderboard, the stages' sections, the cells, the cost
    verdicts          protocol 1: which rows of a task the confirmation seeds tell apart from its best, and how far
    contrasts         protocol 2: every variant against dense per task and metric, the tiers, what a cell could detect
    contrast_page     protocol 2: the contrasts' figures and blocks
    contrast_section  protocol 2: the page's lead and the record's block, from the ledger's confirmation jobs
    stages            the section of each stage of the benchmark, and the per-seed scores a cell's figures read
    axes              the confirmation's and the capacity's axes: distance, length, speed of learning, width, count
    coverage          the share of its task's pairs a layout cell attends, and the cells that compute dense
    stale             which results no longer measure today's code, and why
    suite             protocol 2's suite, chosen from dense's calibration rows
"""
