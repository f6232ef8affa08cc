"""A .venv belongs to its checkout: the Makefile refuses one linked from, or installed for,
another clone instead of repointing that clone's editable install."""

import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.slow  # starts make


def make_venv_owner(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run(
        ["make", "--no-print-directory", "venv-owner"],
        cwd=folder,
        capture_output=True,
        text=True,
        timeout=60,
    )


@pytest.fixture
def checkout(tmp_path):
    folder = tmp_path / "clone"
    folder.mkdir()
    for name in ("Makefile", "dvc.mk"):
        shutil.copy(ROOT / name, folder / name)
    return folder


def installed_from(venv: Path, url: str) -> None:
    record = venv / "lib/python3.11/site-packages/symbnn-0.1.dist-info/direct_url.json"
    record.parent.mkdir(parents=True)
    record.write_text(f'{{"dir_info": {{"editable": true}}, "url": "{url}"}}')


def test_no_venv_or_its_own_venv_passes(checkout):
    assert make_venv_owner(checkout).returncode == 0
    installed_from(checkout / ".venv", f"file://{checkout.resolve()}")
    assert make_venv_owner(checkout).returncode == 0


def test_a_venv_installed_for_another_checkout_is_refused_naming_both(checkout, tmp_path):
    installed_from(checkout / ".venv", "file:///somewhere/else")
    result = make_venv_owner(checkout)
    assert result.returncode != 0
    assert "/somewhere/else" in result.stderr and str(checkout.resolve()) in result.stderr


def test_a_venv_linked_from_another_checkout_is_refused(checkout, tmp_path):
    other = tmp_path / "other" / ".venv"
    installed_from(other, f"file://{other.parent}")
    (checkout / ".venv").symlink_to(other)
    result = make_venv_owner(checkout)
    assert result.returncode != 0
    assert str(other) in result.stderr and str(checkout.resolve()) in result.stderr
