"""The module CA certificate the controller gives every materialize Job (D159): read for each Job
from the ConfigMap the chart mounts; without a usable one no Job starts, and the report says why."""

from __future__ import annotations

from pathlib import Path

from ai_models.controller.delivery.shared_pvc import module_ca_certificate
from support.tls_files import write_tls_files


def test_the_certificate_is_read_from_the_mounted_file(tmp_path: Path) -> None:
    _, _, ca_file = write_tls_files(tmp_path / "tls")
    assert module_ca_certificate(ca_file) == (ca_file.read_text(), "")


def test_without_a_usable_certificate_no_job_is_given_one_and_the_cause_is_named(tmp_path: Path) -> None:
    certificate, problem = module_ca_certificate(None)
    assert certificate is None
    assert "AI_MODELS_DELIVERY_API_CA_FILE is not set" in problem
    certificate, problem = module_ca_certificate(tmp_path / "missing.crt")
    assert certificate is None
    assert "cannot be read (FileNotFoundError)" in problem
    assert "ai-models-ca" in problem
    (tmp_path / "key.pem").write_text("-----BEGIN PRIVATE KEY-----\n")
    certificate, problem = module_ca_certificate(tmp_path / "key.pem")
    assert certificate is None
    assert "holds no PEM certificate" in problem
