"""What a command prints when it refuses: one line on stderr, nothing on stdout, no traceback."""

from attnlab.cli import main


def refusal(capsys, argv: list[str], exit_code: int = 2) -> str:
    """The one line `attnlab ARGV` printed to stderr, having printed nothing else and exited `exit_code`."""
    assert main(argv) == exit_code
    captured = capsys.readouterr()
    assert captured.out == "" and len(captured.err.splitlines()) == 1, captured.err
    return captured.err.strip()
