"""Shell for the bake's signed downloads: a vendor's key file is trusted for one key only, the pinned fingerprint's.

`gpg --verify` returns 0 for a good signature by ANY key in the keyring, so importing a vendor's key file and checking
that the pinned fingerprint is among its keys proves nothing about who signed a download: a key file with one more
key passes, and so does a signature made by that key. Here the key file is imported into a throwaway home, only the
pinned fingerprint's key is exported to a keyring of its own, and signatures are checked by `gpgv` against that keyring
alone (gpgv, the verify-only tool apt itself uses, trusts every key of the keyrings it is given and no other).

A fingerprint also matches a SUBKEY, and gpg then exports the whole keyblock around it: anyone can bind a vendor's
public key as a subkey of a key of their own (no vendor secret needed), and that keyblock's primary key would then
sign for the vendor. So the exported keyring must hold exactly one primary key, the pinned one (apt's signed-by reads
the same keyring), and each signature's VALIDSIG status must name the pinned key as the signer's primary key: the
"Primary key fingerprint" check of the AWS PCS user guide (installing the PCS agent: verify the signature) and of the
CloudWatch agent guide (verifying the signature of the CloudWatch agent package).
"""

from __future__ import annotations


def compact(fingerprint: str) -> str:
    """A fingerprint as gpg prints and takes it: 40 hex digits, no spaces."""
    return fingerprint.replace(" ", "").upper()


def pinned_keyring(*, key_url: str, fingerprint: str, keyring: str, what: str) -> str:
    """Download `key_url` and write `keyring` (a binary keyring apt's signed-by and gpgv read) holding the key whose
    fingerprint is `fingerprint` and nothing else from the file; no such key, or a keyblock whose primary key is not
    the pinned one: the bake stops, naming `what`."""
    fpr = compact(fingerprint)
    # --with-colons: each `pub` line is followed by its primary key's `fpr` line (field 10); a subkey's follows `sub`.
    primaries = (f"gpg --batch --with-colons --show-keys \"{keyring}\" "
                 "| awk -F: '/^pub:/{p=1; next} p && /^fpr:/{print $10; p=0}'")
    return f"""KEYHOME=$(mktemp -d)  # throwaway: the downloaded key file goes here, never into a keyring that verifies
curl -fsSL "{key_url}" -o "$KEYHOME/downloaded-key"
gpg --homedir "$KEYHOME" --batch --quiet --import "$KEYHOME/downloaded-key"
gpg --homedir "$KEYHOME" --batch --export {fpr} > "{keyring}"
test -s "{keyring}" || {{ echo "{what}: the key file holds no key {fingerprint}: not installing" >&2; exit 1; }}
test "$({primaries})" = "{fpr}" \\
  || {{ echo "{what}: the key {fingerprint} comes in a keyblock whose primary key is another's: not installing" >&2; exit 1; }}"""


def verified(*, url: str, name: str, keyring: str, fingerprint: str) -> str:
    """Download `url` to `name` with its detached `.sig`; the bake stops unless the pinned key (and only it) signed it,
    the signer's primary key being `fingerprint`: nothing is unpacked or installed before these lines have passed."""
    fpr = compact(fingerprint)
    # VALIDSIG's last field is the signing key's primary key fingerprint (GnuPG's doc/DETAILS, "VALIDSIG").
    return f"""curl -fsSL "{url}" -o {name}
curl -fsSL "{url}.sig" -o {name}.sig
gpgv --homedir "$(mktemp -d)" --status-fd 1 --keyring "{keyring}" {name}.sig {name} > {name}.status \\
  || {{ echo "{name}: not signed by the pinned key, not installing" >&2; exit 1; }}
awk '$2 == "VALIDSIG" {{print $NF}}' {name}.status | grep -qx "{fpr}" \\
  || {{ echo "{name}: not signed by the pinned key {fpr} (VALIDSIG names another primary key), not installing" >&2; exit 1; }}"""
