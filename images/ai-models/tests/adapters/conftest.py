"""Fixtures for adapter tests: a real moto S3 server (see fakes.s3)."""

from __future__ import annotations

from fakes.s3 import moto_s3, s3_bucket

__all__ = ["moto_s3", "s3_bucket"]
