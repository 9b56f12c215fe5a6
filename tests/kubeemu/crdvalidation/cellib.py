"""Kubernetes CEL libraries on top of cel-python 0.5.0 (which has only standard CEL).

Implemented faithfully enough for CRD rules: the cel-go strings extension (charAt, indexOf,
lastIndexOf, lowerAscii, upperAscii, replace, split, substring, trim, join, strings.quote), the
Kubernetes list library (isSorted, sum, max, min, indexOf, lastIndexOf), regex (find, findAll),
URLs (url, isURL, getScheme, getHost, getHostname, getPort, getEscapedPath, getQuery), quantities
(quantity, isQuantity, compareTo, isGreaterThan, isLessThan, add, sub, sign, isInteger,
asInteger, asApproximateFloat), IP/CIDR (ip, isIP, cidr, isCIDR, family, containsIP, ...) and
sets (sets.contains, sets.equivalent, sets.intersects). Numeric comparisons across int/double are
allowed, as cel-go does. Namespaced calls (`sets.contains(...)`, `strings.quote(...)`) work by
binding `sets`/`strings` to marker values that the shared function names dispatch on.
"""

from __future__ import annotations

import ipaddress
import json
import re
from collections.abc import Callable
from decimal import Decimal, InvalidOperation
from typing import Any
from urllib.parse import urlsplit

import celpy.celtypes as ct
import re2
from celpy.evaluation import base_functions


class Namespace:
    """Marker bound to `sets`, `strings`: `sets.contains(a, b)` evaluates as `contains(<sets>, a, b)`."""

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<CEL namespace {self.name}>"


SETS = Namespace("sets")
STRINGS = Namespace("strings")
NAMESPACE_BINDINGS: dict[str, Any] = {"sets": SETS, "strings": STRINGS}


class URL:
    def __init__(self, text: str) -> None:
        self.text = text
        self.parts = urlsplit(text)


class Quantity:
    def __init__(self, text: str, value: Decimal) -> None:
        self.text = text
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Quantity) and self.value == other.value

    def __hash__(self) -> int:
        return hash(self.value)


class IP:
    def __init__(self, addr: ipaddress.IPv4Address | ipaddress.IPv6Address) -> None:
        self.addr = addr

    def __eq__(self, other: object) -> bool:
        return isinstance(other, IP) and self.addr == other.addr

    def __hash__(self) -> int:
        return hash(self.addr)


class CIDR:
    def __init__(self, text: str, net: ipaddress.IPv4Network | ipaddress.IPv6Network) -> None:
        self.text = text
        self.net = net

    def __eq__(self, other: object) -> bool:
        return isinstance(other, CIDR) and self.net == other.net

    def __hash__(self) -> int:
        return hash(self.net)


def _s(value: Any) -> str:
    if not isinstance(value, str):
        raise TypeError(f"expected string, got {type(value).__name__}")
    return str(value)


# --- strings ---------------------------------------------------------------------------------


def _char_at(s: Any, i: Any) -> Any:
    text = _s(s)
    if not 0 <= int(i) <= len(text):
        raise ValueError(f"index out of range: {int(i)}")
    return ct.StringType(text[int(i)] if int(i) < len(text) else "")


def _index_of(container: Any, item: Any, start: Any = None) -> Any:
    if isinstance(container, list):
        for i, value in enumerate(container):
            if _equal(value, item):
                return ct.IntType(i)
        return ct.IntType(-1)
    text, sub = _s(container), _s(item)
    begin = int(start) if start is not None else 0
    if not 0 <= begin <= len(text):
        raise ValueError(f"index out of range: {begin}")
    return ct.IntType(text.find(sub, begin))


def _last_index_of(container: Any, item: Any, end: Any = None) -> Any:
    if isinstance(container, list):
        for i in range(len(container) - 1, -1, -1):
            if _equal(container[i], item):
                return ct.IntType(i)
        return ct.IntType(-1)
    text, sub = _s(container), _s(item)
    if end is None:
        return ct.IntType(text.rfind(sub))
    return ct.IntType(text.rfind(sub, 0, int(end) + len(sub)))


def _replace(s: Any, old: Any, new: Any, n: Any = None) -> Any:
    count = -1 if n is None else int(n)
    return ct.StringType(_s(s).replace(_s(old), _s(new), count))


def _split(s: Any, sep: Any, n: Any = None) -> Any:
    text, separator = _s(s), _s(sep)
    limit = -1 if n is None else int(n)
    if limit == 0:
        return ct.ListType([])
    if separator == "":
        parts = list(text)
        if limit > 0 and len(parts) > limit:
            parts = [*parts[: limit - 1], "".join(parts[limit - 1 :])]
    else:
        parts = text.split(separator, limit - 1) if limit > 0 else text.split(separator)
    return ct.ListType([ct.StringType(p) for p in parts])


def _substring(s: Any, start: Any, end: Any = None) -> Any:
    text = _s(s)
    begin = int(start)
    finish = len(text) if end is None else int(end)
    if not 0 <= begin <= finish <= len(text):
        raise ValueError(f"substring out of range: [{begin}:{finish}]")
    return ct.StringType(text[begin:finish])


def _join(items: Any, sep: Any = "") -> Any:
    return ct.StringType(_s(sep).join(_s(item) for item in items))


def _lower_ascii(s: Any) -> Any:
    return ct.StringType("".join(c.lower() if c.isascii() else c for c in _s(s)))


def _upper_ascii(s: Any) -> Any:
    return ct.StringType("".join(c.upper() if c.isascii() else c for c in _s(s)))


def _trim(s: Any) -> Any:
    return ct.StringType(_s(s).strip())


def _quote(namespace: Any, s: Any = None) -> Any:
    if namespace is not STRINGS:
        raise TypeError("quote is strings.quote")
    return ct.StringType(json.dumps(_s(s), ensure_ascii=False))


# --- lists -----------------------------------------------------------------------------------


def _equal(a: Any, b: Any) -> bool:
    if _is_number(a) and _is_number(b):
        return float(a) == float(b)
    return bool(a == b)


def _is_number(value: Any) -> bool:
    return isinstance(value, (ct.IntType, ct.UintType, ct.DoubleType)) and not isinstance(value, ct.BoolType)


def _is_sorted(items: Any) -> Any:
    values = list(items)
    return ct.BoolType(all(_compare(values[i], values[i + 1]) <= 0 for i in range(len(values) - 1)))


def _sum(items: Any) -> Any:
    values = list(items)
    if not values:
        return ct.IntType(0)
    total = values[0]
    for value in values[1:]:
        total = total + value
    return total


def _max(items: Any) -> Any:
    values = list(items)
    if not values:
        raise ValueError("max(list) called on an empty list")
    best = values[0]
    for value in values[1:]:
        if _compare(value, best) > 0:
            best = value
    return best


# --- regex -----------------------------------------------------------------------------------


def _find(s: Any, pattern: Any) -> Any:
    match = re2.search(_s(pattern), _s(s))
    return ct.StringType(match.group(0) if match else "")


def _find_all(s: Any, pattern: Any, limit: Any = None) -> Any:
    found = [m.group(0) for m in re2.finditer(_s(pattern), _s(s))]
    if limit is not None and int(limit) >= 0:
        found = found[: int(limit)]
    return ct.ListType([ct.StringType(f) for f in found])


# --- URLs ------------------------------------------------------------------------------------


def _is_url(s: Any) -> Any:
    text = _s(s)
    try:
        parts = urlsplit(text)
    except ValueError:
        return ct.BoolType(False)
    # Go's url.ParseRequestURI: absolute URL, or an absolute path.
    return ct.BoolType(bool(parts.scheme) or text.startswith("/"))


def _url(s: Any) -> URL:
    if not _is_url(s):
        raise ValueError(f"URL parse error during conversion from string: {s}")
    return URL(_s(s))


def _get_scheme(u: URL) -> Any:
    return ct.StringType(u.parts.scheme)


def _get_host(u: URL) -> Any:
    return ct.StringType(u.parts.netloc.rpartition("@")[2])


def _get_hostname(u: URL) -> Any:
    host = u.parts.netloc.rpartition("@")[2]
    if host.startswith("["):
        return ct.StringType(host[1 : host.index("]")])
    return ct.StringType(host.partition(":")[0])


def _get_port(u: URL) -> Any:
    host = u.parts.netloc.rpartition("@")[2]
    if host.startswith("["):
        rest = host[host.index("]") + 1 :]
        return ct.StringType(rest[1:] if rest.startswith(":") else "")
    return ct.StringType(host.partition(":")[2])


def _get_escaped_path(u: URL) -> Any:
    return ct.StringType(u.parts.path)


def _get_query(u: URL) -> Any:
    query: dict[str, list[str]] = {}
    for pair in filter(None, u.parts.query.split("&")):
        key, _, value = pair.partition("=")
        query.setdefault(key, []).append(value)
    return ct.MapType(
        {ct.StringType(k): ct.ListType([ct.StringType(v) for v in vs]) for k, vs in query.items()}
    )


# --- quantities ------------------------------------------------------------------------------

_QUANTITY = re.compile(r"^([+-]?[0-9.]+)([eE][+-]?[0-9]+|[a-zA-Z]*)$")
_SUFFIX_TEXT: dict[str, int | str] = {
    "": 1,
    "n": "1e-9",
    "u": "1e-6",
    "m": "1e-3",
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_SUFFIX = {suffix: Decimal(factor) for suffix, factor in _SUFFIX_TEXT.items()}


def _parse_quantity(text: str) -> Quantity | None:
    match = _QUANTITY.match(text)
    if not match or match.group(1) in ("", ".", "+", "-"):
        return None
    number, suffix = match.groups()
    try:
        base = Decimal(number)
        if suffix[:1] in ("e", "E") and suffix[1:].lstrip("+-").isdigit():
            return Quantity(text, base * (Decimal(10) ** int(suffix[1:])))
        if suffix not in _SUFFIX:
            return None
        return Quantity(text, base * Decimal(_SUFFIX[suffix]))
    except InvalidOperation:
        return None


def _is_quantity(s: Any) -> Any:
    return ct.BoolType(_parse_quantity(_s(s)) is not None)


def _quantity(s: Any) -> Quantity:
    parsed = _parse_quantity(_s(s))
    if parsed is None:
        raise ValueError(f"quantities must match the regular expression: {s}")
    return parsed


def _q(value: Any) -> Decimal:
    if isinstance(value, Quantity):
        return value.value
    if isinstance(value, (ct.IntType, int)):
        return Decimal(int(value))
    raise TypeError("not a quantity")


def _compare_to(a: Any, b: Any) -> Any:
    return ct.IntType((_q(a) > _q(b)) - (_q(a) < _q(b)))


def _is_greater_than(a: Any, b: Any) -> Any:
    return ct.BoolType(_q(a) > _q(b))


def _is_less_than(a: Any, b: Any) -> Any:
    return ct.BoolType(_q(a) < _q(b))


def _add(a: Any, b: Any) -> Any:
    total = _q(a) + _q(b)
    return Quantity(str(total), total)


def _sub(a: Any, b: Any) -> Any:
    total = _q(a) - _q(b)
    return Quantity(str(total), total)


def _sign(a: Any) -> Any:
    value = _q(a)
    return ct.IntType((value > 0) - (value < 0))


def _is_integer(a: Any) -> Any:
    return ct.BoolType(_q(a) == _q(a).to_integral_value())


def _as_integer(a: Any) -> Any:
    value = _q(a)
    if value != value.to_integral_value():
        raise ValueError("cannot convert value to integer")
    return ct.IntType(int(value))


def _as_approximate_float(a: Any) -> Any:
    return ct.DoubleType(float(_q(a)))


# --- IP / CIDR -------------------------------------------------------------------------------


def _parse_ip(text: str) -> IP | None:
    if "%" in text:
        return None
    try:
        return IP(ipaddress.ip_address(text))
    except ValueError:
        return None


def _is_ip(s: Any) -> Any:
    return ct.BoolType(_parse_ip(_s(s)) is not None)


def _ip(s: Any) -> IP:
    parsed = _parse_ip(_s(s))
    if parsed is None:
        raise ValueError(f"IP Address {s!r} parse error during conversion from string")
    return parsed


def _parse_cidr(text: str) -> CIDR | None:
    if "/" not in text:
        return None
    try:
        return CIDR(text, ipaddress.ip_network(text, strict=False))
    except ValueError:
        return None


def _is_cidr(s: Any) -> Any:
    return ct.BoolType(_parse_cidr(_s(s)) is not None)


def _cidr(s: Any) -> CIDR:
    parsed = _parse_cidr(_s(s))
    if parsed is None:
        raise ValueError(f"network address {s!r} parse error during conversion from string")
    return parsed


def _contains_ip(c: CIDR, ip: Any) -> Any:
    address = ip.addr if isinstance(ip, IP) else _ip(ip).addr
    return ct.BoolType(address in c.net)


def _contains_cidr(c: CIDR, other: Any) -> Any:
    net = other.net if isinstance(other, CIDR) else _cidr(other).net
    return ct.BoolType(net.version == c.net.version and net.subnet_of(c.net))  # type: ignore[arg-type]


def _family(value: Any) -> Any:
    return ct.IntType(value.addr.version if isinstance(value, IP) else value.net.version)


def _ip_of(value: CIDR) -> IP:
    return IP(ipaddress.ip_address(value.text.partition("/")[0]))


def _prefix_length(value: CIDR) -> Any:
    return ct.IntType(value.net.prefixlen)


def _masked(value: CIDR) -> CIDR:
    return CIDR(str(value.net), value.net)


def _ip_predicate(attr: str) -> Callable[[IP], Any]:
    def check(value: IP) -> Any:
        return ct.BoolType(bool(getattr(value.addr, attr)))

    return check


# --- shared names (string vs list vs namespace dispatch) -------------------------------------

_STD_CONTAINS = base_functions["contains"]
_STD_STRING = base_functions["string"]
_STD_MIN_DEFINED = "min"


def _contains(target: Any, *args: Any) -> Any:
    if target is SETS:
        first, second = args
        return ct.BoolType(all(any(_equal(x, y) for y in first) for x in second))
    return _STD_CONTAINS(target, *args)


def _equivalent(namespace: Any, first: Any, second: Any) -> Any:
    if namespace is not SETS:
        raise TypeError("equivalent is sets.equivalent")
    return ct.BoolType(
        all(any(_equal(x, y) for y in second) for x in first)
        and all(any(_equal(x, y) for y in first) for x in second)
    )


def _intersects(namespace: Any, first: Any, second: Any) -> Any:
    if namespace is not SETS:
        raise TypeError("intersects is sets.intersects")
    return ct.BoolType(any(_equal(x, y) for x in first for y in second))


def _string(value: Any) -> Any:
    if isinstance(value, (IP, CIDR)):
        return ct.StringType(str(value.addr if isinstance(value, IP) else value.text))
    if isinstance(value, URL):
        return ct.StringType(value.text)
    if isinstance(value, Quantity):
        return ct.StringType(value.text)
    return _STD_STRING(value)


# --- cross-type numeric comparison -----------------------------------------------------------


def _compare(a: Any, b: Any) -> int:
    if _is_number(a) and _is_number(b):
        x, y = float(a), float(b)
    elif isinstance(a, Quantity) and isinstance(b, Quantity):
        x, y = a.value, b.value  # type: ignore[assignment]
    else:
        if type(a) is not type(b) and not (isinstance(a, str) and isinstance(b, str)):
            raise TypeError(f"no such overload: {type(a).__name__} < {type(b).__name__}")
        return int(a > b) - int(a < b)
    return int(x > y) - int(x < y)


def _relation(op: Callable[[int], bool], std: Callable[[Any, Any], Any]) -> Callable[[Any, Any], Any]:
    def compare(a: Any, b: Any) -> Any:
        if _is_number(a) and _is_number(b) and type(a) is not type(b):
            return ct.BoolType(op(_compare(a, b)))
        return std(a, b)

    return compare


def _eq(a: Any, b: Any) -> Any:
    if _is_number(a) and _is_number(b):
        return ct.BoolType(float(a) == float(b))
    return base_functions["_==_"](a, b)


def _ne(a: Any, b: Any) -> Any:
    if _is_number(a) and _is_number(b):
        return ct.BoolType(float(a) != float(b))
    return base_functions["_!=_"](a, b)


KUBERNETES_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "charAt": _char_at,
    "indexOf": _index_of,
    "lastIndexOf": _last_index_of,
    "lowerAscii": _lower_ascii,
    "upperAscii": _upper_ascii,
    "replace": _replace,
    "split": _split,
    "substring": _substring,
    "trim": _trim,
    "join": _join,
    "quote": _quote,
    "isSorted": _is_sorted,
    "sum": _sum,
    "max": _max,
    "find": _find,
    "findAll": _find_all,
    "isURL": _is_url,
    "url": _url,
    "getScheme": _get_scheme,
    "getHost": _get_host,
    "getHostname": _get_hostname,
    "getPort": _get_port,
    "getEscapedPath": _get_escaped_path,
    "getQuery": _get_query,
    "isQuantity": _is_quantity,
    "quantity": _quantity,
    "compareTo": _compare_to,
    "isGreaterThan": _is_greater_than,
    "isLessThan": _is_less_than,
    "add": _add,
    "sub": _sub,
    "sign": _sign,
    "isInteger": _is_integer,
    "asInteger": _as_integer,
    "asApproximateFloat": _as_approximate_float,
    "isIP": _is_ip,
    "ip": lambda v: _ip_of(v) if isinstance(v, CIDR) else _ip(v),
    "isCIDR": _is_cidr,
    "cidr": _cidr,
    "containsIP": _contains_ip,
    "containsCIDR": _contains_cidr,
    "family": _family,
    "prefixLength": _prefix_length,
    "masked": _masked,
    "isUnspecified": _ip_predicate("is_unspecified"),
    "isLoopback": _ip_predicate("is_loopback"),
    "isLinkLocalMulticast": lambda v: ct.BoolType(v.addr.is_link_local and v.addr.is_multicast),
    "isLinkLocalUnicast": lambda v: ct.BoolType(v.addr.is_link_local and not v.addr.is_multicast),
    "isGlobalUnicast": lambda v: ct.BoolType(v.addr.is_global and not v.addr.is_multicast),
    "contains": _contains,
    "equivalent": _equivalent,
    "intersects": _intersects,
    "string": _string,
    "_<_": _relation(lambda c: c < 0, base_functions["_<_"]),
    "_<=_": _relation(lambda c: c <= 0, base_functions["_<=_"]),
    "_>_": _relation(lambda c: c > 0, base_functions["_>_"]),
    "_>=_": _relation(lambda c: c >= 0, base_functions["_>=_"]),
    "_==_": _eq,
    "_!=_": _ne,
}

# Every function or method name a rule may call: cel-python's built-ins, its macros, and ours.
KNOWN_FUNCTIONS = (
    frozenset(base_functions)
    | frozenset(KUBERNETES_FUNCTIONS)
    | {
        "has",
        "dyn",
        "all",
        "exists",
        "exists_one",
        "map",
        "filter",
        "min",
    }
)
