"""Synthetic Hugging Face models with the payloads the real Hub serves for them.

Each architecture family carries a real-shaped `config.json` (values from the published configs
of the model it imitates) and matching `safetensors` / `gguf` listing summaries, so the indexer
derives the same facts it would from the Hub. A few repositories are deliberately odd (a config
that is not JSON, a JSON array, nonsense values, a file list that lies) to prove one bad model
never fails a pass. Generation is deterministic for a given seed.
"""

from __future__ import annotations

import copy
import dataclasses
import datetime
import hashlib
import json
import random
from collections.abc import Callable, Mapping
from typing import Any, Final

from fakes.model_files import FileContent, content_sha256, content_size, git_blob_id, lfs_pointer

DAY: Final = datetime.timedelta(days=1)
EPOCH: Final = datetime.datetime(2021, 1, 1, tzinfo=datetime.UTC)

AUTHORS: Final = (
    "meta-llama",
    "mistralai",
    "deepseek-ai",
    "google",
    "Qwen",
    "microsoft",
    "bartowski",
    "TheBloke",
    "sentence-transformers",
    "llava-hf",
    "unsloth",
    "nvidia",
)
LICENSES: Final = ("apache-2.0", "mit", "llama3.1", "gemma", "other", "cc-by-nc-4.0")


@dataclasses.dataclass
class FakeModel:
    """One repository. `config` is config.json (None: the repository has none); `config_body`
    overrides the served bytes, for configs that are not JSON.

    `contents` are files the fake serves byte for byte (`bytes`, or a `SyntheticFile` for large
    ones); they take precedence over `config`/README. `private_token`: the repository is private
    and only a request with `Authorization: Bearer <private_token>` sees it (others get the Hub's
    401 RepoNotFound).
    """

    id: str
    sha: str
    pipeline_tag: str | None
    library_name: str | None
    tags: list[str]
    downloads: int
    likes: int
    trending_score: float
    created_at: datetime.datetime
    last_modified: datetime.datetime
    gated: bool | str = False
    safetensors: dict[str, Any] | None = None
    gguf: dict[str, Any] | None = None
    files: list[str] = dataclasses.field(default_factory=list)
    config: Any = None
    config_body: bytes | None = None
    license: str | None = None
    family: str = ""
    contents: Mapping[str, FileContent] | None = None
    private_token: str | None = None

    @property
    def author(self) -> str:
        return self.id.split("/", 1)[0]

    def content(self, path: str) -> FileContent | None:
        """The bytes served for `path`, or None when the repository has no such file."""
        if self.contents is not None and path in self.contents:
            return self.contents[path]
        if path == "config.json":
            return self.config_bytes()
        if path == "README.md" and path in self.files:
            return f"# {self.id}\n".encode()
        return None

    def blob(self, path: str) -> dict[str, Any] | None:
        """The Hub's `blobs=true` facts of a served file: size, blobId and, for LFS files, lfs."""
        content = self.content(path)
        if content is None:
            return None
        size = content_size(content)
        if is_lfs(path):
            sha256 = content_sha256(content)
            pointer = lfs_pointer(sha256, size)
            return {
                "size": size,
                "blobId": git_blob_id(pointer),
                "lfs": {"sha256": sha256, "size": size, "pointerSize": len(pointer)},
            }
        assert isinstance(content, bytes), (
            f"{path}: synthetic files are LFS files (.safetensors, .gguf, .bin)"
        )
        return {"size": size, "blobId": git_blob_id(content)}

    def config_bytes(self) -> bytes | None:
        if self.config_body is not None:
            return self.config_body
        if self.config is None:
            return None
        return json.dumps(self.config, indent=2).encode()

    def properties(self) -> dict[str, Any]:
        """Every property the Hub can expand, under the Hub's names."""
        return {
            "author": self.author,
            "sha": self.sha,
            "pipeline_tag": self.pipeline_tag,
            "library_name": self.library_name,
            "tags": list(self.tags),
            "gated": self.gated,
            "private": self.private_token is not None,
            "disabled": False,
            "downloads": self.downloads,
            "downloadsAllTime": self.downloads * 7,
            "likes": self.likes,
            "trendingScore": self.trending_score,
            "createdAt": _iso(self.created_at),
            "lastModified": _iso(self.last_modified),
            "safetensors": copy.deepcopy(self.safetensors),
            "gguf": copy.deepcopy(self.gguf),
            "siblings": [{"rfilename": name} for name in self.files],
            "config": self.trimmed_config(),
            "cardData": {"license": self.license} if self.license else {},
            "usedStorage": self._used_storage(),
            "spaces": [],
            "transformersInfo": None,
            "widgetData": None,
        }

    def _used_storage(self) -> int:
        total = (self.safetensors or self.gguf or {}).get("total")
        return total * 2 if isinstance(total, int) else 0

    def trimmed_config(self) -> dict[str, Any] | None:
        """The Hub's listing `config`: architectures and model_type only (plus quantization)."""
        if not isinstance(self.config, Mapping):
            return None
        kept = {key: self.config[key] for key in ("architectures", "model_type") if key in self.config}
        if isinstance(self.config.get("quantization_config"), Mapping):
            kept["quantization_config"] = {
                "quant_method": self.config["quantization_config"].get("quant_method")
            }
        return kept or None


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    weight: int
    build: Callable[[random.Random, int], FakeModel]


def make_corpus(size: int, *, seed: int = 0) -> list[FakeModel]:
    """`size` models with unique ids, in no particular order (the fake Hub sorts on request)."""
    rng = random.Random(seed)
    families = list(FAMILIES)
    weights = [family.weight for family in families]
    return [rng.choices(families, weights)[0].build(rng, index) for index in range(size)]


def make_model(family: str, index: int, *, seed: int = 0) -> FakeModel:
    """One model of the named family (see FAMILIES), for tests that need a specific shape."""
    by_name = {item.name: item for item in FAMILIES}
    return by_name[family].build(random.Random(f"{seed}-{family}-{index}"), index)


LFS_SUFFIXES: Final = (".safetensors", ".gguf", ".bin")


def is_lfs(path: str) -> bool:
    """Files the fake stores in LFS, as the Hub does for weights."""
    return path.lower().endswith(LFS_SUFFIXES)


def repository(
    model_id: str,
    contents: Mapping[str, FileContent],
    *,
    sha: str | None = None,
    pipeline_tag: str | None = "text-generation",
    library_name: str | None = "transformers",
    tags: list[str] | None = None,
    gguf: dict[str, Any] | None = None,
    gated: bool | str = False,
    private_token: str | None = None,
) -> FakeModel:
    """A repository that serves `contents`, its file list being exactly their paths."""
    config: Any = None
    config_body = contents.get("config.json")
    if isinstance(config_body, bytes):
        try:
            config = json.loads(config_body)
        except ValueError:
            config = None
    return FakeModel(
        id=model_id,
        sha=sha or hashlib.sha1(model_id.encode(), usedforsecurity=False).hexdigest(),
        pipeline_tag=pipeline_tag,
        library_name=library_name,
        tags=list(tags if tags is not None else [library_name or "gguf", pipeline_tag or "other"]),
        downloads=0,
        likes=0,
        trending_score=0.0,
        created_at=EPOCH,
        last_modified=EPOCH,
        gated=gated,
        gguf=gguf,
        files=sorted(contents),
        config=config,
        contents=dict(contents),
        private_token=private_token,
        family="repository",
    )


def _iso(moment: datetime.datetime) -> str:
    return (
        moment.astimezone(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    )


def _sha(rng: random.Random) -> str:
    return f"{rng.getrandbits(160):040x}"


def _popularity(rng: random.Random) -> tuple[int, int, float]:
    downloads = int(rng.paretovariate(1.1) * 50) - 50
    likes = int(downloads**0.5 * rng.random())
    return downloads, likes, round(rng.random() * 40, 3)


def _dates(rng: random.Random) -> tuple[datetime.datetime, datetime.datetime]:
    created = EPOCH + rng.randrange(1500) * DAY + datetime.timedelta(seconds=rng.randrange(86400))
    return created, created + rng.randrange(300) * DAY + datetime.timedelta(seconds=rng.randrange(86400))


def _shards(total_bytes: int, per_shard: int = 5_000_000_000) -> list[str]:
    count = max(1, -(-total_bytes // per_shard))
    if count == 1:
        return ["model.safetensors"]
    return [f"model-{n:05d}-of-{count:05d}.safetensors" for n in range(1, count + 1)] + [
        "model.safetensors.index.json"
    ]


def _transformers_model(
    rng: random.Random,
    index: int,
    *,
    family: str,
    authors: tuple[str, ...],
    stem: str,
    pipeline_tag: str,
    config: dict[str, Any],
    parameters: dict[str, int],
    library: str = "transformers",
    extra_tags: tuple[str, ...] = (),
    gated_odds: float = 0.1,
) -> FakeModel:
    downloads, likes, trending = _popularity(rng)
    created, modified = _dates(rng)
    license_id = rng.choice(LICENSES)
    total = sum(parameters.values())
    weights_bytes = sum(
        count * {"F32": 4, "BF16": 2, "F16": 2}.get(dtype, 1) for dtype, count in parameters.items()
    )
    roll = rng.random()
    gated: bool | str = "manual" if roll < gated_odds / 3 else "auto" if roll < gated_odds else False
    tags = [
        library,
        "safetensors",
        str(config.get("model_type", family)),
        pipeline_tag,
        *extra_tags,
        "en",
        f"license:{license_id}",
        "autotrain_compatible",
        "endpoints_compatible",
        "region:us",
    ]
    return FakeModel(
        id=f"{rng.choice(authors)}/{stem}-{index:05d}",
        sha=_sha(rng),
        pipeline_tag=pipeline_tag,
        library_name=library,
        tags=list(dict.fromkeys(tags)),
        downloads=downloads,
        likes=likes,
        trending_score=trending,
        created_at=created,
        last_modified=modified,
        gated=gated,
        safetensors={"parameters": parameters, "total": total},
        files=[
            ".gitattributes",
            "README.md",
            "config.json",
            "generation_config.json",
            *_shards(weights_bytes),
            "tokenizer.json",
            "tokenizer_config.json",
            "special_tokens_map.json",
        ],
        config=config,
        license=license_id,
        family=family,
    )


_LLAMA_SIZES: Final = (
    # hidden, layers, heads, kv heads, intermediate, head_dim, parameters
    (2048, 16, 32, 8, 8192, 64, 1_235_814_400),
    (4096, 32, 32, 8, 14336, 128, 8_030_261_248),
    (8192, 80, 64, 8, 28672, 128, 70_553_706_496),
)


def _llama(rng: random.Random, index: int) -> FakeModel:
    hidden, layers, heads, kv_heads, intermediate, head_dim, parameters = rng.choice(_LLAMA_SIZES)
    config = {
        "architectures": ["LlamaForCausalLM"],
        "model_type": "llama",
        "hidden_size": hidden,
        "num_hidden_layers": layers,
        "num_attention_heads": heads,
        "num_key_value_heads": kv_heads,
        "intermediate_size": intermediate,
        "head_dim": head_dim,
        "max_position_embeddings": 131072,
        "vocab_size": 128256,
        "rms_norm_eps": 1e-05,
        "rope_theta": 500000.0,
        "rope_scaling": {"factor": 8.0, "rope_type": "llama3", "original_max_position_embeddings": 8192},
        "tie_word_embeddings": hidden == 2048,
        "torch_dtype": "bfloat16",
        "bos_token_id": 128000,
        "eos_token_id": [128001, 128008, 128009],
        "transformers_version": "4.43.0.dev0",
    }
    return _transformers_model(
        rng,
        index,
        family="llama",
        authors=("meta-llama", "unsloth", "nvidia"),
        stem=f"Llama-3.1-{round(parameters / 1e9)}B-Instruct",
        pipeline_tag="text-generation",
        config=config,
        parameters={"BF16": parameters},
        extra_tags=("llama-3", "conversational", "text-generation-inference"),
    )


def _mixtral(rng: random.Random, index: int) -> FakeModel:
    config = {
        "architectures": ["MixtralForCausalLM"],
        "model_type": "mixtral",
        "hidden_size": 4096,
        "num_hidden_layers": 32,
        "num_attention_heads": 32,
        "num_key_value_heads": 8,
        "intermediate_size": 14336,
        "num_local_experts": 8,
        "num_experts_per_tok": 2,
        "max_position_embeddings": 32768,
        "sliding_window": None,
        "vocab_size": 32000,
        "rope_theta": 1000000.0,
        "router_aux_loss_coef": 0.02,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.36.0.dev0",
    }
    return _transformers_model(
        rng,
        index,
        family="mixtral",
        authors=("mistralai",),
        stem="Mixtral-8x7B-Instruct-v0.1",
        pipeline_tag="text-generation",
        config=config,
        parameters={"BF16": 46_702_792_704},
        extra_tags=("moe", "conversational"),
    )


def _deepseek(rng: random.Random, index: int) -> FakeModel:
    config = {
        "architectures": ["DeepseekV3ForCausalLM"],
        "model_type": "deepseek_v3",
        "hidden_size": 7168,
        "num_hidden_layers": 61,
        "num_attention_heads": 128,
        "num_key_value_heads": 128,
        "intermediate_size": 18432,
        "moe_intermediate_size": 2048,
        "kv_lora_rank": 512,
        "q_lora_rank": 1536,
        "qk_rope_head_dim": 64,
        "qk_nope_head_dim": 128,
        "v_head_dim": 128,
        "n_routed_experts": 256,
        "n_shared_experts": 1,
        "num_experts_per_tok": 8,
        "first_k_dense_replace": 3,
        "max_position_embeddings": 163840,
        "vocab_size": 129280,
        "torch_dtype": "bfloat16",
        "quantization_config": {
            "quant_method": "fp8",
            "fmt": "e4m3",
            "activation_scheme": "dynamic",
            "weight_block_size": [128, 128],
        },
        "transformers_version": "4.46.3",
    }
    return _transformers_model(
        rng,
        index,
        family="deepseek",
        authors=("deepseek-ai", "unsloth"),
        stem="DeepSeek-V3",
        pipeline_tag="text-generation",
        config=config,
        parameters={"BF16": 3_918_786_560, "F8_E4M3": 680_571_043_840, "F32": 41_555_600},
        extra_tags=("deepseek_v3", "conversational", "fp8"),
        gated_odds=0.0,
    )


def _gemma(rng: random.Random, index: int) -> FakeModel:
    config = {
        "architectures": ["Gemma2ForCausalLM"],
        "model_type": "gemma2",
        "hidden_size": 3584,
        "num_hidden_layers": 42,
        "num_attention_heads": 16,
        "num_key_value_heads": 8,
        "head_dim": 256,
        "intermediate_size": 14336,
        "sliding_window": 4096,
        "layer_types": ["sliding_attention", "full_attention"] * 21,
        "max_position_embeddings": 8192,
        "vocab_size": 256000,
        "query_pre_attn_scalar": 256,
        "final_logit_softcapping": 30.0,
        "attn_logit_softcapping": 50.0,
        "torch_dtype": "bfloat16",
        "transformers_version": "4.42.0.dev0",
    }
    return _transformers_model(
        rng,
        index,
        family="gemma",
        authors=("google",),
        stem="gemma-2-9b-it",
        pipeline_tag="text-generation",
        config=config,
        parameters={"BF16": 9_241_705_984},
        extra_tags=("conversational",),
        gated_odds=0.6,
    )


def _bert(rng: random.Random, index: int) -> FakeModel:
    config = {
        "architectures": ["BertModel"],
        "model_type": "bert",
        "hidden_size": 384,
        "num_hidden_layers": 12,
        "num_attention_heads": 12,
        "intermediate_size": 1536,
        "max_position_embeddings": 512,
        "vocab_size": 30522,
        "type_vocab_size": 2,
        "hidden_act": "gelu",
        "torch_dtype": "float32",
        "transformers_version": "4.8.2",
    }
    return _transformers_model(
        rng,
        index,
        family="bert",
        authors=("sentence-transformers", "microsoft"),
        stem="all-MiniLM-L12-v2",
        pipeline_tag="sentence-similarity",
        library="sentence-transformers",
        config=config,
        parameters={"F32": 33_360_000},
        extra_tags=("feature-extraction", "transformers"),
        gated_odds=0.0,
    )


def _multimodal(rng: random.Random, index: int) -> FakeModel:
    config = {
        "architectures": ["LlavaForConditionalGeneration"],
        "model_type": "llava",
        "image_token_index": 32000,
        "projector_hidden_act": "gelu",
        "vision_feature_layer": -2,
        "text_config": {
            "model_type": "mistral",
            "hidden_size": 4096,
            "num_hidden_layers": 32,
            "num_attention_heads": 32,
            "num_key_value_heads": 8,
            "intermediate_size": 14336,
            "max_position_embeddings": 32768,
            "vocab_size": 32064,
            "rope_theta": 1000000.0,
        },
        "vision_config": {
            "model_type": "clip_vision_model",
            "hidden_size": 1024,
            "num_hidden_layers": 24,
            "num_attention_heads": 16,
            "image_size": 336,
            "patch_size": 14,
        },
        "torch_dtype": "float16",
        "transformers_version": "4.39.0.dev0",
    }
    return _transformers_model(
        rng,
        index,
        family="multimodal",
        authors=("llava-hf",),
        stem="llava-v1.6-mistral-7b-hf",
        pipeline_tag="image-text-to-text",
        config=config,
        parameters={"F16": 7_566_747_648},
        extra_tags=("vision", "conversational"),
        gated_odds=0.0,
    )


_GGUF_BASES: Final = (
    # repository stem, gguf architecture, parameters, context length
    ("Meta-Llama-3.1-8B-Instruct", "llama", 8_030_261_312, 131072),
    ("Qwen2.5-7B-Instruct", "qwen2", 7_615_616_512, 32768),
    ("Mistral-7B-Instruct-v0.3", "llama", 7_248_023_552, 32768),
)


def _gguf(rng: random.Random, index: int) -> FakeModel:
    downloads, likes, trending = _popularity(rng)
    created, modified = _dates(rng)
    stem, architecture, total, context = rng.choice(_GGUF_BASES)
    return FakeModel(
        id=f"{rng.choice(('bartowski', 'TheBloke', 'unsloth'))}/{stem}-GGUF-{index:05d}",
        sha=_sha(rng),
        pipeline_tag="text-generation",
        library_name=None,
        tags=[
            "gguf",
            architecture,
            "text-generation",
            "en",
            "license:apache-2.0",
            "endpoints_compatible",
            "region:us",
        ],
        downloads=downloads,
        likes=likes,
        trending_score=trending,
        created_at=created,
        last_modified=modified,
        gguf={
            "total": total,
            "architecture": architecture,
            "context_length": context,
            "chat_template": "{% for message in messages %}{{ message['content'] }}{% endfor %}",
            "bos_token": "<s>",
            "eos_token": "</s>",
        },
        files=[
            ".gitattributes",
            "README.md",
            f"{stem}-Q4_K_M.gguf",
            f"{stem}-Q5_K_M.gguf",
            f"{stem}-Q8_0.gguf",
        ],
        license="apache-2.0",
        family="gguf",
    )


def _odd(rng: random.Random, index: int) -> FakeModel:
    """A repository whose files or metadata are not what they claim; the pass must shrug."""
    model = _llama(rng, index)
    model.family = "odd"
    model.id = f"{model.author}/odd-model-{index:05d}"
    kind = rng.randrange(4)
    if kind == 0:
        model.config_body = b"<!doctype html><title>not a config</title>"
    elif kind == 1:
        model.config = ["not", "an", "object"]
    elif kind == 2:
        model.config = {"architectures": "LlamaForCausalLM", "num_hidden_layers": "many", "hidden_size": -1}
        model.safetensors = {"parameters": {"BF16": "lots"}, "total": None}
    else:
        model.config = None  # the file list names config.json, but the repository has none
    return model


FAMILIES: Final = (
    Family("llama", 30, _llama),
    Family("mixtral", 8, _mixtral),
    Family("deepseek", 4, _deepseek),
    Family("gemma", 12, _gemma),
    Family("bert", 15, _bert),
    Family("multimodal", 8, _multimodal),
    Family("gguf", 15, _gguf),
    Family("odd", 8, _odd),
)
