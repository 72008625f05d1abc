"""Long loops show a progress bar on a terminal and stay quiet when piped."""
import io
import sys

from privsdr._progress import progress


class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_quiet_when_piped(monkeypatch):
    out = io.StringIO()
    monkeypatch.setattr(sys, "stderr", out)
    assert list(progress(range(5000), 5000, "x")) == list(range(5000))
    assert out.getvalue() == ""


def test_bar_on_a_terminal(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert list(progress(range(5000), 5000, "audit samples")) == list(range(5000))
    assert "audit samples" in tty.getvalue()


def test_short_loops_never_show_a_bar(monkeypatch):
    tty = _Tty()
    monkeypatch.setattr(sys, "stderr", tty)
    assert list(progress(range(10), 10)) == list(range(10))
    assert tty.getvalue() == ""
