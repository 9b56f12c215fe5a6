"""What an uploaded payload is, judged by its first bytes, and safe names for what it contains (pure).

Uploads are accepted by content, never by file name: a `.gguf` name on an HTML error page must
not become a model. Names that do come from the user (the upload's file name, archive member
paths) are reduced to safe relative paths before they become object-store keys.
"""

from __future__ import annotations

import enum
import posixpath
import re
import struct

SNIFF_BYTES = 512  # enough for every signature below (tar's sits at offset 257)
MAX_SAFETENSORS_HEADER = 100 * 1024 * 1024  # the safetensors format's own limit
MAX_PATH_CHARS = 1024
# Used with fullmatch: `$` would let a trailing "\n" through.
_SAFE_SEGMENT = re.compile(r"[A-Za-z0-9][A-Za-z0-9._+-]{0,199}")


class PayloadFormat(enum.StrEnum):
    GGUF = "GGUF"
    SAFETENSORS = "Safetensors"
    TAR = "Tar"
    TAR_GZIP = "TarGzip"
    ZIP = "Zip"


ACCEPTED_DESCRIPTION = "a GGUF or safetensors file, or a tar, tar.gz or zip archive of a model directory"


def sniff(head: bytes) -> PayloadFormat | None:
    """The payload's format from its first `SNIFF_BYTES` bytes (fewer if it is shorter)."""
    if head.startswith(b"GGUF"):
        return PayloadFormat.GGUF
    if head.startswith(b"PK\x03\x04"):
        return PayloadFormat.ZIP
    if head.startswith(b"\x1f\x8b"):
        return PayloadFormat.TAR_GZIP
    if len(head) >= 262 and head[257:262] == b"ustar":
        return PayloadFormat.TAR
    if len(head) >= 9:
        (header_length,) = struct.unpack("<Q", head[:8])
        if 2 <= header_length <= MAX_SAFETENSORS_HEADER and head[8:9] == b"{":
            return PayloadFormat.SAFETENSORS
    return None


_EXTENSIONS = {
    PayloadFormat.GGUF: ".gguf",
    PayloadFormat.SAFETENSORS: ".safetensors",
    PayloadFormat.TAR: ".tar",
    PayloadFormat.TAR_GZIP: ".tar.gz",
    PayloadFormat.ZIP: ".zip",
}


_SINGLE_FILE_FORMATS = frozenset({PayloadFormat.GGUF, PayloadFormat.SAFETENSORS})


def default_filename(payload_format: PayloadFormat) -> str:
    stem = "model" if payload_format in _SINGLE_FILE_FORMATS else "upload"
    return stem + _EXTENSIONS[payload_format]


def safe_filename(name: str | None, payload_format: PayloadFormat) -> str:
    """The recorded name of an upload: the user's base name when safe, else a default.

    The extension always matches the content, so a runtime that looks for `*.gguf` finds a
    single-file upload; an archive keeps an archive's extension (its members are published, not it).
    """
    extension = _EXTENSIONS[payload_format]
    base = posixpath.basename((name or "").replace("\\", "/"))
    stored = base if base.lower().endswith(extension) else base + extension
    if not _SAFE_SEGMENT.fullmatch(base) or not _SAFE_SEGMENT.fullmatch(stored):
        return default_filename(payload_format)
    return stored


def filename_note(name: str | None, stored: str, payload_format: PayloadFormat) -> str | None:
    """Why the recorded name is not the one the uploader gave, for the upload's answer; None when
    it is (or when no name was given). A silent rename reads as a lost name."""
    if not name or name == stored or payload_format not in _SINGLE_FILE_FORMATS:
        return None  # an archive's own name is never published: its members are
    base = posixpath.basename(name.replace("\\", "/"))
    reasons = []
    if base != name:
        reasons.append("only the last segment of a path is kept")
    extension = _EXTENSIONS[payload_format]
    candidate = base if base.lower().endswith(extension) else base + extension
    if candidate != stored:  # the base name was not safe: safe_filename fell back to the default
        reasons.append(
            "a stored name may hold only letters, digits, '.', '_', '+' and '-', start with a letter "
            "or a digit and be at most 200 characters long, so the default name is used"
        )
    elif stored != base:
        reasons.append(f"the extension follows the content ({payload_format.value})")
    return f"{name!r} is stored as {stored!r}: {' and '.join(reasons)}"


def safe_member_path(path: str) -> str | None:
    """A relative `/`-separated path inside the artifact, or None when the member must be skipped.

    Refused: absolute paths, `..`, drive letters, backslashes, control characters, hidden segments
    (`.git/...`) and segments outside `[A-Za-z0-9._+-]`.
    """
    if not path or len(path) > MAX_PATH_CHARS or "\\" in path or "\x00" in path:
        return None
    if path.startswith("/") or re.match(r"^[A-Za-z]:", path):
        return None
    parts = [part for part in path.split("/") if part not in ("", ".")]
    if not parts or any(not _SAFE_SEGMENT.fullmatch(part) for part in parts):
        return None
    return "/".join(parts)
