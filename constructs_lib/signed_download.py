"""Shell for the bake's signed downloads: a vendor's key file is trusted for one key only, the pinned fingerprint's.

`gpg --verify` returns 0 for a good signature by ANY key in the keyring, so importing a vendor's key file and checking
that the pinned fingerprint is among its keys proves nothing about who signed a download: a key file with one more
key passes, and so does a signature made by that key. Here the key file is imported into a throwaway home, only the
pinned fingerprint's key is exported to a keyring of its own, and signatures are checked by `gpgv` against that keyring
alone (gpgv, the verify-only tool apt itself uses, trusts every key of the keyrings it is given and no other).
"""

from __future__ import annotations


def compact(fingerprint: str) -> str:
    """A fingerprint as gpg prints and takes it: 40 hex digits, no spaces."""
    return fingerprint.replace(" ", "").upper()


def pinned_keyring(*, key_url: str, fingerprint: str, keyring: str, what: str) -> str:
    """Download `key_url` and write `keyring` (a binary keyring apt's signed-by and gpgv read) holding the key whose
    fingerprint is `fingerprint` and nothing else from the file; no such key: the bake stops, naming `what`."""
    fpr = compact(fingerprint)
    return f"""KEYHOME=$(mktemp -d)  # throwaway: the downloaded key file goes here, never into a keyring that verifies
curl -fsSL "{key_url}" -o "$KEYHOME/downloaded-key"
gpg --homedir "$KEYHOME" --batch --quiet --import "$KEYHOME/downloaded-key"
gpg --homedir "$KEYHOME" --batch --export {fpr} > "{keyring}"
test -s "{keyring}" || {{ echo "{what}: the key file holds no key {fingerprint}: not installing" >&2; exit 1; }}"""


def verified(*, url: str, name: str, keyring: str) -> str:
    """Download `url` to `name` with its detached `.sig`; the bake stops unless the pinned key (and only it) signed it:
    nothing is unpacked or installed before this line has passed."""
    return f"""curl -fsSL "{url}" -o {name}
curl -fsSL "{url}.sig" -o {name}.sig
gpgv --homedir "$(mktemp -d)" --keyring "{keyring}" {name}.sig {name} \\
  || {{ echo "{name}: not signed by the pinned key, not installing" >&2; exit 1; }}"""
