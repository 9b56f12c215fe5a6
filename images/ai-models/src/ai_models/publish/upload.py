"""Publishing an upload: the payload the upload API stored, as one weights file or unpacked.

The upload record (written last by the upload API) says what arrived: its sha256, size, format
and file name. A GGUF or safetensors payload becomes one file under its safe name, verified
against the received sha256; a tar, tar.gz or zip archive is unpacked member by member, and the
weights-format choice of `select_files` is applied to what it held.
"""

from __future__ import annotations

import logging

from ai_models.adapters.objectstore import ObjectNotFound, ObjectStore, SizeMismatch
from ai_models.domain.artifacts.layout import upload_payload_key, upload_record_key
from ai_models.domain.artifacts.selection import Selection, select_files
from ai_models.domain.artifacts.sniff import SNIFF_BYTES, PayloadFormat, safe_filename, sniff
from ai_models.domain.artifacts.upload_record import UploadRecord, UploadRecordError, record_from_json
from ai_models.domain.storage.ledger import Owner
from ai_models.names import ModelReason
from ai_models.publish.archives import (
    ARCHIVE_ERRORS,
    Budget,
    extract_tar,
    extract_tar_gz,
    extract_zip,
    verify_payload_size,
)
from ai_models.publish.artifact import ArtifactWriter
from ai_models.publish.failures import PublicationFailure, unsupported
from ai_models.publish.progress import Progress
from ai_models.publish.streams import CountingReader

logger = logging.getLogger(__name__)

_SINGLE_FILE = frozenset({PayloadFormat.GGUF, PayloadFormat.SAFETENSORS})


def read_record(store: ObjectStore, owner: Owner) -> UploadRecord:
    key = upload_record_key(owner)
    try:
        return record_from_json(store.get_bytes(key))
    except ObjectNotFound as error:
        raise PublicationFailure(
            ModelReason.SOURCE_NOT_FOUND,
            f"no finished upload for {owner.kind} {_name(owner)}: upload the model through the URL in "
            "status.upload",
        ) from error
    except UploadRecordError as error:
        raise PublicationFailure(
            ModelReason.SOURCE_NOT_FOUND,
            f"the upload record of {owner.kind} {_name(owner)} is unreadable ({_short(error)}): "
            "upload the model again",
        ) from error


def publish_upload(
    store: ObjectStore, owner: Owner, record: UploadRecord, writer: ArtifactWriter, progress: Progress
) -> Selection:
    """Store the upload's files; returns the selection they make (its format is the artifact's)."""
    key = upload_payload_key(owner)
    _check_format(store, key, record)
    progress.total = record.size_bytes
    try:
        if record.format in _SINGLE_FILE:
            _single_file(store, key, record, writer, progress)
        elif record.format is PayloadFormat.ZIP:
            extract_zip(store, key, writer, size=record.size_bytes, progress=progress)
        elif record.format is PayloadFormat.TAR:
            extract_tar(store, key, writer, size=record.size_bytes, progress=progress)
        else:
            with store.open_range(key) as raw:
                payload = CountingReader(raw, on_bytes=progress.add)
                extract_tar_gz(payload, writer, budget=Budget.for_payload(record.size_bytes))
                verify_payload_size(payload, record.size_bytes)
    except ARCHIVE_ERRORS as error:
        raise unsupported(
            f"the {record.format.value} payload is damaged or not what it claims "
            f"({type(error).__name__}: {_short(error)})"
        ) from error
    except NotImplementedError as error:  # zip compression methods Python cannot read (deflate64, ...)
        raise unsupported(
            f"the zip archive uses a compression method that cannot be read ({_short(error)})"
        ) from error
    except SizeMismatch as error:
        raise PublicationFailure(
            ModelReason.ARTIFACT_DAMAGED,
            "the stored upload is not as long as what was received: it was changed or damaged in the "
            "object store; upload the model again",
        ) from error
    return _final_selection(writer)


def _check_format(store: ObjectStore, key: str, record: UploadRecord) -> None:
    try:
        with store.open_range(key, start=0, end=SNIFF_BYTES - 1) as stream:
            head = stream.read(SNIFF_BYTES)
    except ObjectNotFound as error:
        raise PublicationFailure(
            ModelReason.SOURCE_NOT_FOUND,
            "the upload record is there but its payload is not: upload the model again",
        ) from error
    found = sniff(head)
    if found is not record.format:
        raise unsupported(
            f"its first bytes are {found.value if found else 'no known format'}, but the upload was "
            f"received as {record.format.value}"
        )


def _single_file(
    store: ObjectStore, key: str, record: UploadRecord, writer: ArtifactWriter, progress: Progress
) -> None:
    name = safe_filename(record.filename, record.format)
    with store.open_range(key) as stream:
        stored = writer.put(name, stream, size=record.size_bytes, on_bytes=progress.add)
    if stored.sha256 != record.sha256:
        raise PublicationFailure(
            ModelReason.ARTIFACT_DAMAGED,
            f"the stored upload has sha256 {stored.sha256}, but {record.sha256} was received: it was "
            "changed or damaged in the object store; upload the model again",
        )


def _final_selection(writer: ArtifactWriter) -> Selection:
    """One weights format (and one GGUF variant) among the unpacked files, as for a repository."""
    selection = select_files(item.path for item in writer.files)
    if not selection.accepted:
        raise unsupported("the archive holds no safetensors or GGUF weights")
    left_out = [item.path for item in writer.files if item.path not in set(selection.files)]
    if left_out:
        logger.info(
            "unpacked files left out by the format choice",
            extra={"files": left_out[:20], "count": len(left_out)},
        )
        writer.remove(left_out)
    return selection


def _short(error: Exception) -> str:
    """An error's text for a message: archive libraries quote member names, which can be long."""
    text = str(error)
    return text if len(text) <= 200 else text[:197] + "..."


def _name(owner: Owner) -> str:
    return f"{owner.namespace}/{owner.name}" if owner.namespace else owner.name
