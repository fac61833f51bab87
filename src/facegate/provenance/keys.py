"""The installation's signing identity: a private CA, a signing certificate under it and the
signing key, as PEM files in one folder (``FACEGATE_PROVENANCE_DIR``; in Kubernetes a Secret
mounted there). ``facegate provenance init`` makes them for an installation without its own.

The installation id (in the manifest's job reference) is derived from the CA certificate, so
every worker of one installation names the same id, and rotating the signing certificate under
the same CA keeps it (docs/provenance.md, key rotation).

The watermark carries no public id: its payload is authenticated by a MAC under the mark key
(``mark.key``), a secret derived from the CA's private key with HKDF, so only this
installation can make a mark that verifies. It is derived, not drawn: ``rotate`` (and an
operator who lost the file, from ``ca.key``) writes the same key again, so the marks issued
before a rotation still verify.
"""

from __future__ import annotations

import datetime
import hashlib
import hmac
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from facegate.provenance.errors import ProvenanceUnavailable

KEY_FILE = "signer.key"  # the signing key (PKCS#8 PEM)
CHAIN_FILE = "signer.pem"  # the signing certificate, then the CA certificate
CA_FILE = "ca.pem"  # the trust anchor verification checks against
CA_KEY_FILE = "ca.key"  # kept only to issue the next signing certificate (key rotation)
MARK_KEY_FILE = "mark.key"  # the watermark MAC's secret (derived from ca.key; hex)
_MARK_KEY_INFO = b"facegate watermark mark key v1"


@dataclass(frozen=True)
class InstallationKeys:
    """What signing and verification need, loaded once per process."""

    key_pem: bytes
    chain_pem: bytes
    ca_pem: bytes
    mark_key: bytes  # 32 bytes: the root of the installation's MAC keys (see ``mac_key``)

    @property
    def installation_id(self) -> int:
        return installation_id_of(self.ca_pem)

    def mac_key(self, purpose: str) -> bytes:
        """A key for one use of the mark key (``"watermark"``, ``"reporter"``): one secret,
        one key per purpose, so a MAC made for one use never verifies as another."""
        return hmac.digest(self.mark_key, f"facegate {purpose}".encode(), "sha256")


def installation_id_of(ca_pem: bytes) -> int:
    """A 16-bit id of the installation: the first bytes of the CA certificate's hash."""
    der = x509.load_pem_x509_certificate(ca_pem).public_bytes(serialization.Encoding.DER)
    return int.from_bytes(hashlib.sha256(der).digest()[:2], "big")


def load_keys(directory: Path) -> InstallationKeys:
    """The keys in ``directory``; ProvenanceUnavailable naming what is missing or broken."""
    try:
        keys = InstallationKeys(
            key_pem=(directory / KEY_FILE).read_bytes(),
            chain_pem=(directory / CHAIN_FILE).read_bytes(),
            ca_pem=(directory / CA_FILE).read_bytes(),
            mark_key=_read_mark_key(directory),
        )
        serialization.load_pem_private_key(keys.key_pem, password=None)
        x509.load_pem_x509_certificates(keys.chain_pem)
        installation_id_of(keys.ca_pem)
    except FileNotFoundError as exc:
        raise ProvenanceUnavailable(
            f"no signing key in {directory} ({Path(exc.filename or '').name} is missing): "
            "run `facegate provenance init` or mount the installation's provenance Secret"
        ) from None
    except ValueError as exc:
        raise ProvenanceUnavailable(
            f"the signing key in {directory} is unreadable: {exc}"
        ) from None
    return keys


def derive_mark_key(ca_key: ec.EllipticCurvePrivateKey) -> bytes:
    """The mark key of the CA ``ca_key``: HKDF-SHA256 of its private scalar (always the same
    for one CA, unrelated to the signing key that rotation replaces)."""
    scalar = ca_key.private_numbers().private_value.to_bytes(32, "big")
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=_MARK_KEY_INFO).derive(scalar)


def _load_ca_key(directory: Path) -> ec.EllipticCurvePrivateKey:
    ca_key = serialization.load_pem_private_key(
        (directory / CA_KEY_FILE).read_bytes(), password=None
    )
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise ProvenanceUnavailable("the CA key is not an EC key")
    return ca_key


def _read_mark_key(directory: Path) -> bytes:
    """``mark.key``; without it (an installation made before marks had a MAC) derived from
    ``ca.key`` when that is here (the embedded shape). A cluster's Secret must carry it."""
    path = directory / MARK_KEY_FILE
    if path.is_file():
        key = bytes.fromhex(path.read_text().strip())
        if len(key) != 32:
            raise ValueError(f"{MARK_KEY_FILE} does not hold 32 bytes")
        return key
    if (directory / CA_KEY_FILE).is_file():
        return derive_mark_key(_load_ca_key(directory))
    raise ProvenanceUnavailable(
        f"no {MARK_KEY_FILE} in {directory} (the watermark's MAC key): run "
        f"`facegate provenance rotate` where {CA_KEY_FILE} is, and add {MARK_KEY_FILE} to the "
        "installation's provenance Secret"
    )


def write_mark_key(directory: Path, ca_key: ec.EllipticCurvePrivateKey) -> None:
    """``mark.key`` of the CA, written owner-only when missing (the same key when present)."""
    path = directory / MARK_KEY_FILE
    if not path.is_file():
        _write_secret(path, derive_mark_key(ca_key).hex().encode() + b"\n")


def keys_exist(directory: Path) -> bool:
    return all((directory / name).is_file() for name in (KEY_FILE, CHAIN_FILE, CA_FILE))


def _name(common_name: str, organisation: str) -> x509.Name:
    return x509.Name(
        [
            x509.NameAttribute(NameOID.ORGANIZATION_NAME, organisation),
            x509.NameAttribute(NameOID.COMMON_NAME, common_name),
        ]
    )


def _usage(*, signer: bool) -> x509.KeyUsage:
    return x509.KeyUsage(
        digital_signature=signer,
        content_commitment=False,
        key_encipherment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=not signer,
        crl_sign=not signer,
        encipher_only=False,
        decipher_only=False,
    )


def _pem(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def issue_signer(
    ca_cert: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey, organisation: str, days: int
) -> tuple[bytes, bytes]:
    """A new signing key and its certificate under the CA: (key PEM, chain PEM).

    The profile C2PA asks of a signing certificate: not a CA, digitalSignature, an extended
    key usage (emailProtection), issued by a CA rather than self-signed."""
    now = datetime.datetime.now(datetime.UTC)
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(_name("facegate result signer", organisation))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=days))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_usage(signer=True), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage([ExtendedKeyUsageOID.EMAIL_PROTECTION]), critical=False
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    return _key_pem(key), _pem(cert) + _pem(ca_cert)


def create_keys(
    directory: Path, *, organisation: str = "facegate installation", days: int = 825
) -> InstallationKeys:
    """A private CA (10 years) and a signing certificate under it, written to ``directory``
    (keys readable by the owner only). Refuses to overwrite an existing identity: the
    watermarks and manifests already issued name it."""
    if keys_exist(directory):
        raise FileExistsError(f"{directory} already holds a signing identity")
    directory.mkdir(parents=True, exist_ok=True)
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = _name("facegate provenance CA", organisation)
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=3650))
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(_usage(signer=False), critical=True)
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    key_pem, chain_pem = issue_signer(ca_cert, ca_key, organisation, days)
    _write_secret(directory / CA_KEY_FILE, _key_pem(ca_key))
    write_mark_key(directory, ca_key)
    _write_secret(directory / KEY_FILE, key_pem)
    (directory / CHAIN_FILE).write_bytes(chain_pem)
    (directory / CA_FILE).write_bytes(_pem(ca_cert))
    return load_keys(directory)


def rotate_signer(directory: Path, *, days: int = 825) -> InstallationKeys:
    """A new signing key and certificate under the same CA (the installation id and the
    mark key, which derive from the CA, stay; files signed and marked before still verify).
    Writes ``mark.key`` when missing (an installation made before it existed)."""
    try:
        ca_cert = x509.load_pem_x509_certificate((directory / CA_FILE).read_bytes())
        ca_key = _load_ca_key(directory)
    except FileNotFoundError as exc:
        raise ProvenanceUnavailable(
            f"{Path(exc.filename or '').name} is missing in {directory}: rotation needs the CA"
        ) from None
    write_mark_key(directory, ca_key)
    organisation = ca_cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value
    key_pem, chain_pem = issue_signer(ca_cert, ca_key, str(organisation), days)
    (directory / KEY_FILE).unlink(missing_ok=True)
    _write_secret(directory / KEY_FILE, key_pem)
    (directory / CHAIN_FILE).write_bytes(chain_pem)
    return load_keys(directory)


def _write_secret(path: Path, data: bytes) -> None:
    path.touch(mode=0o600, exist_ok=False)
    path.write_bytes(data)
