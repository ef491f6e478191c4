"""A run records the commit of the code it ran: the checkout at import, not whatever is checked out when it ends."""

import subprocess
from pathlib import Path

from common import provenance


def test_the_commit_is_the_one_checked_out_at_import_and_stays_when_the_checkout_moves(monkeypatch):
    recorded = provenance.git_commit()
    here = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True,
                          cwd=Path(provenance.__file__).parent)
    if here.returncode == 0:  # in a checkout (CI's clone is one): the commit checked out, in full
        assert recorded == here.stdout.strip() and len(recorded) == 40
    monkeypatch.setattr(provenance, "_checked_out", lambda: "0" * 40)  # another commit checked out meanwhile
    assert provenance.git_commit() == recorded
