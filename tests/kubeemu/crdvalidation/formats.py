"""String formats the apiserver checks in CRD schemas (the kube-openapi format registry, as restricted
to Kubernetes' supported set). Unknown formats are not checked, as on the apiserver."""

from __future__ import annotations

import base64
import binascii
import ipaddress
import re
from collections.abc import Callable
from datetime import date, datetime
from urllib.parse import urlparse

_UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE)
_UUID_V = {
    "uuid3": re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-3[0-9a-f]{3}-[0-9a-f]{4}-[0-9a-f]{12}$", re.IGNORECASE),
    "uuid4": re.compile(
        r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", re.IGNORECASE
    ),
    "uuid5": re.compile(
        r"^[0-9a-f]{8}-[0-9a-f]{4}-5[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$", re.IGNORECASE
    ),
}
_HOSTNAME = re.compile(
    r"^([a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)(\.[a-zA-Z0-9]([a-zA-Z0-9-]{0,61}[a-zA-Z0-9])?)*\.?$"
)
_EMAIL = re.compile(r"^[^@\s]+@[^@\s]+$")
_MAC = re.compile(r"^([0-9a-fA-F]{2}[:-]){5}[0-9a-fA-F]{2}$")
_HEXCOLOR = re.compile(r"^#?([0-9a-fA-F]{3}|[0-9a-fA-F]{6})$")
_RGBCOLOR = re.compile(r"^rgb\(\s*\d{1,3}\s*,\s*\d{1,3}\s*,\s*\d{1,3}\s*\)$")
_DATETIME = re.compile(r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})$")
_DURATION = re.compile(
    r"^(\d+(\.\d+)?\s*(ns|us|µs|ms|s|m|h|d|w|"
    r"seconds?|minutes?|hours?|days?|weeks?)\s*)+$"
)


def _datetime(value: str) -> bool:
    if not _DATETIME.match(value):
        return False
    try:
        datetime.fromisoformat(value.replace("Z", "+00:00").replace("z", "+00:00").replace(" ", "T"))
    except ValueError:
        return False
    return True


def _date(value: str) -> bool:
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return len(value) == 10


def _ip(version: int) -> Callable[[str], bool]:
    def check(value: str) -> bool:
        try:
            return ipaddress.ip_address(value).version == version
        except ValueError:
            return False

    return check


def _cidr(value: str) -> bool:
    try:
        ipaddress.ip_network(value, strict=False)
    except ValueError:
        return False
    return "/" in value


def _byte(value: str) -> bool:
    try:
        base64.b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        return False
    return True


def _uri(value: str) -> bool:
    parsed = urlparse(value)
    return bool(parsed.scheme)


FORMAT_CHECKS: dict[str, Callable[[str], bool]] = {
    "date-time": _datetime,
    "datetime": _datetime,
    "date": _date,
    "duration": lambda v: bool(_DURATION.match(v)),
    "uuid": lambda v: bool(_UUID.match(v)),
    "uuid3": lambda v: bool(_UUID_V["uuid3"].match(v)),
    "uuid4": lambda v: bool(_UUID_V["uuid4"].match(v)),
    "uuid5": lambda v: bool(_UUID_V["uuid5"].match(v)),
    "hostname": lambda v: bool(_HOSTNAME.match(v)) and len(v) <= 255,
    "email": lambda v: bool(_EMAIL.match(v)),
    "ipv4": _ip(4),
    "ipv6": _ip(6),
    "cidr": _cidr,
    "mac": lambda v: bool(_MAC.match(v)),
    "byte": _byte,
    "uri": _uri,
    "hexcolor": lambda v: bool(_HEXCOLOR.match(v)),
    "rgbcolor": lambda v: bool(_RGBCOLOR.match(v)),
}


def check_format(fmt: str, value: str) -> bool:
    """True when `value` is valid for `fmt` (or `fmt` is not one the apiserver checks)."""
    check = FORMAT_CHECKS.get(fmt)
    return True if check is None else check(value)
