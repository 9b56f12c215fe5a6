"""Which listed models need a size request, so every entry the Hub can size carries `weightsBytes`.

The listing's safetensors counts size most models for free. The rest (an FP8 or MXFP4 checkpoint
the Hub did not parse, a GGUF-only repository, an encoder shipped as one `model.safetensors`)
are sized by one file-list request each (`HubClient.fetch_size`), which answers with the very
number a publication of the entry reserves. That request is spent only where it can pay: not for
a model the listing sizes already, not for one whose listed files hold nothing the publisher
would take (the same `select_files` decides), not without a commit to pin it to, and not for a
gated repository without a token (the Hub would refuse it). D131.
"""

from __future__ import annotations

from ai_models.adapters.hub import HubModel
from ai_models.domain.artifacts.selection import select_files
from ai_models.domain.catalog.facts import FactSources, listed_weights_bytes
from ai_models.domain.catalog.record import Gated


def listing_sources(model: HubModel) -> FactSources:
    """The listing's own facts of `model`, config.json not included."""
    return FactSources(
        config=model.listing_config,
        safetensors_parameters=model.safetensors_parameters,
        safetensors_total=model.safetensors_total,
        gguf=model.gguf,
        tags=model.tags,
        library_name=model.library_name,
        filenames=model.filenames,
    )


def wants_size(model: HubModel, *, authenticated: bool) -> bool:
    if model.sha is None or not (authenticated or model.gated is Gated.NONE):
        return False
    if listed_weights_bytes(listing_sources(model)) is not None:
        return False
    # Last, and so only for the few the listing leaves unsized: the selection is the costly check.
    # No safetensors or GGUF weights: nothing would be published, no size exists.
    return model.filenames is None or select_files(model.filenames).accepted
