"""Real OpenPGP keys for the bake's signature tests: a `pinned` key (the vendor's), an `extra` one (anyone's) and an
`impostor` (anyone's key carrying the pinned key's public half as a subkey, which a fingerprint also matches), made
with this machine's gpg, and a curl stand-in that serves files from a folder by the URL's last path segment. The bake's
own shell then runs against real gpg and gpgv: nothing about signatures is stubbed."""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest

# curl -fsSL URL -o FILE: copies $SERVE/<last segment of URL> to FILE (fails like curl -f when absent), logs the URL
CURL = ('#!/bin/bash\nwhile [ $# -gt 0 ]; do case $1 in -o) out=$2; shift;; -*) ;; *) url=$1;; esac; shift; done\n'
        'echo "$url" >> "$SERVE/curl.log"\ncp "$SERVE/${url##*/}" "$out" 2>/dev/null || exit 22\n')


@dataclass(frozen=True)
class Keys:
    root: Path

    def home(self, who: str) -> Path:
        return self.root / who

    def fingerprint(self, who: str) -> str:
        """`who`'s primary key fingerprint (its own key: the impostor's home also holds the pinned key)."""
        out = _gpg(self.home(who), "--with-colons", "--list-keys", f"<{who}@example.com>").stdout
        return next(line.split(":")[9] for line in out.splitlines() if line.startswith("fpr:"))

    def key_file(self, path: Path, *who: str) -> Path:
        """An armored key file holding these keys' public halves (each keyblock whole), as a vendor's URL would
        serve it."""
        path.write_text("".join(_gpg(self.home(w), "--armor", "--export", self.fingerprint(w)).stdout for w in who))
        return path

    def sign(self, who: str, path: Path) -> Path:
        """`path`'s detached signature `path.sig`, made by `who`'s primary key."""
        sig = path.with_name(path.name + ".sig")
        _gpg(self.home(who), "--local-user", self.fingerprint(who) + "!", "--detach-sign", "--output", str(sig),
             str(path))
        return sig


WHO = ("pinned", "extra", "impostor")


def _gpg(home: Path, *args: str, input: str | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(["gpg", "--homedir", str(home), "--batch", "--yes", "--pinentry-mode", "loopback",
                           "--passphrase", "", *args], capture_output=True, text=True, check=True, timeout=60,
                          input=input)


def make_keys(root: Path) -> Keys:
    if not shutil.which("gpg") or not shutil.which("gpgv"):
        pytest.skip("gpg and gpgv are needed to make and check real signatures")
    # gpg-agent's socket lives in the home: under pytest-xdist tmp_path is too long for a Unix socket (108 bytes), so
    # the homes go in a short folder of their own (`root` is kept for the caller's files).
    keys = Keys(Path(tempfile.mkdtemp(prefix="gpg-", dir="/tmp")))
    for who in WHO:
        keys.home(who).mkdir(mode=0o700, parents=True)
        if who != "impostor":
            _gpg(keys.home(who), "--quick-gen-key", f"{who} <{who}@example.com>", "ed25519", "sign", "never")
    _bind_as_subkey(keys, owner="impostor", bound="pinned")
    return keys


def _bind_as_subkey(keys: Keys, *, owner: str, bound: str) -> None:
    """Add `bound`'s key material to `owner`'s keyblock as a subkey with `bound`'s creation time, so the subkey's
    fingerprint is `bound`'s. gpg's "Existing key" (addkey 13) takes the key by keygrip from the agent, so the test
    hands the owner's agent the bound key's secret; an attacker needs no secret for a subkey without the sign flag
    (RFC 4880 5.2.1: only signing subkeys carry a back-signature), the test's shortcut changes nothing that matters."""
    home = keys.home(bound)
    listing = _gpg(home, "--with-colons", "--with-keygrip", "--list-secret-keys").stdout.splitlines()
    created = next(line.split(":")[5] for line in listing if line.startswith("sec:"))
    grip = next(line.split(":")[9] for line in listing if line.startswith("grp:"))
    secret = subprocess.run(["gpg", "--homedir", str(home), "--batch", "--pinentry-mode", "loopback", "--passphrase",
                             "", "--export-secret-keys"], capture_output=True, check=True, timeout=60).stdout
    # The owner's key is made at the bound key's creation time too: the binding is signed then (the subkey's
    # fingerprint hashes its creation time), and gpg refuses a binding older than the key that makes it.
    _gpg(keys.home(owner), "--faked-system-time", f"{created}!", "--quick-gen-key", f"{owner} <{owner}@example.com>",
         "ed25519", "sign", "never")
    subprocess.run(["gpg", "--homedir", str(keys.home(owner)), "--batch", "--import"], input=secret,
                   capture_output=True, check=True, timeout=60)
    _gpg(keys.home(owner), "--expert", "--command-fd", "0", "--faked-system-time", f"{created}!", "--edit-key",
         keys.fingerprint(owner), input=f"addkey\n13\n{grip}\nQ\n0\nsave\n")
    assert keys.fingerprint(bound) in _gpg(keys.home(owner), "--with-colons", "--list-keys",
                                           keys.fingerprint(owner)).stdout


def short_tmpdir() -> str:
    """A TMPDIR for the bake's shell: its mktemp'd gpg homes hold gpg-agent's socket, whose path must stay under a
    Unix socket's 108 bytes (pytest-xdist's tmp_path does not)."""
    return tempfile.mkdtemp(prefix="bake-", dir="/tmp")


def stop_agents(keys: Keys) -> None:
    for who in WHO:
        subprocess.run(["gpgconf", "--homedir", str(keys.home(who)), "--kill", "gpg-agent"], capture_output=True,
                       env={**os.environ})
    shutil.rmtree(keys.root, ignore_errors=True)


def curl_on_path(bin_dir: Path) -> None:
    bin_dir.mkdir(parents=True, exist_ok=True)
    (bin_dir / "curl").write_text(CURL)
    (bin_dir / "curl").chmod(0o755)
