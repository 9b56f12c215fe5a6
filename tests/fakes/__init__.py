"""Fakes of external services that tests run as real processes (S3 through moto, ...)."""
