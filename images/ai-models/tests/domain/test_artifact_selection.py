"""Which files of a repository become the artifact, on listings shaped like real Hugging Face
repositories: one weight format plus its companions, nothing else."""

from __future__ import annotations

import posixpath
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ai_models.domain.artifacts.selection import GGUF_PREFERENCE, Selection, select_files
from ai_models.domain.catalog.record import WeightsFormat

BOUNDED = settings(max_examples=300, deadline=None)

# Extensions of weight files in any format, supported or not.
WEIGHT_EXTENSIONS = {
    ".safetensors": "safetensors",
    ".gguf": "gguf",
    ".bin": "pytorch",
    ".pt": "pytorch",
    ".pth": "pytorch",
    ".ckpt": "pytorch",
    ".pkl": "pytorch",
    ".onnx": "onnx",
    ".onnx_data": "onnx",
    ".h5": "tensorflow",
    ".tflite": "tensorflow",
    ".msgpack": "flax",
    ".ot": "rust",
    ".mlmodel": "coreml",
}


def weight_format(path: str) -> str | None:
    return WEIGHT_EXTENSIONS.get(posixpath.splitext(path.lower())[1])


LLAMA_COMPANIONS = {
    "LICENSE",
    "README.md",
    "USE_POLICY.md",
    "config.json",
    "generation_config.json",
    "model.safetensors.index.json",
    "special_tokens_map.json",
    "tokenizer.json",
    "tokenizer_config.json",
}
LLAMA_SAFETENSORS = {f"model-0000{index}-of-00004.safetensors" for index in range(1, 5)}
LLAMA = [
    ".gitattributes",
    *LLAMA_COMPANIONS,
    *LLAMA_SAFETENSORS,
    *(f"pytorch_model-0000{index}-of-00004.bin" for index in range(1, 5)),
    "pytorch_model.bin.index.json",
    "original/consolidated.00.pth",
    "original/params.json",
    "original/tokenizer.model",
    "onnx/model.onnx",
    "onnx/model.onnx_data",
    "onnx/tokenizer.json",
    "onnx/config.json",
    "flax_model.msgpack",
    "tf_model.h5",
    "convert_llama_weights_to_hf.py",
    "assets/benchmark.png",
]

# openai-community/gpt2 as listed by the Hub: every export of the same weights side by side.
GPT2_SELECTED = {
    "README.md",
    "config.json",
    "generation_config.json",
    "merges.txt",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "vocab.json",
}
GPT2 = [
    ".gitattributes",
    *GPT2_SELECTED,
    "64-8bits.tflite",
    "64-fp16.tflite",
    "64.tflite",
    "flax_model.msgpack",
    "pytorch_model.bin",
    "rust_model.ot",
    "tf_model.h5",
    "onnx/config.json",
    "onnx/decoder_model.onnx",
    "onnx/decoder_model_merged.onnx",
    "onnx/decoder_with_past_model.onnx",
    "onnx/generation_config.json",
    "coreml/text-generation/float32_model.mlpackage/Data/com.apple.CoreML/model.mlmodel",
    "coreml/text-generation/float32_model.mlpackage/Data/com.apple.CoreML/weights/weight.bin",
    "coreml/text-generation/float32_model.mlpackage/Manifest.json",
]

DIFFUSERS_SELECTED = {
    "README.md",
    "model_index.json",
    "feature_extractor/preprocessor_config.json",
    "scheduler/scheduler_config.json",
    "text_encoder/config.json",
    "text_encoder/model.safetensors",
    "tokenizer/merges.txt",
    "tokenizer/special_tokens_map.json",
    "tokenizer/tokenizer_config.json",
    "tokenizer/vocab.json",
    "unet/config.json",
    "unet/diffusion_pytorch_model.safetensors",
    "vae/config.json",
    "vae/diffusion_pytorch_model.safetensors",
}
DIFFUSERS = [
    ".gitattributes",
    *DIFFUSERS_SELECTED,
    "text_encoder/pytorch_model.bin",
    "text_encoder/flax_model.msgpack",
    "unet/diffusion_pytorch_model.bin",
    "unet/diffusion_flax_model.msgpack",
    "vae/diffusion_pytorch_model.bin",
    "vae_decoder/model.onnx",
    "sd_xl_base_1.0.ckpt",
    "images/sample.jpg",
    "train_dreambooth.sh",
]

# Qwen/Qwen2.5-7B-Instruct-GGUF: every quantization, the larger ones split into shards.
QWEN_GGUF = [
    ".gitattributes",
    "LICENSE",
    "README.md",
    *(f"qwen2.5-7b-instruct-fp16-0000{index}-of-00004.gguf" for index in range(1, 5)),
    "qwen2.5-7b-instruct-q2_k.gguf",
    "qwen2.5-7b-instruct-q3_k_m.gguf",
    "qwen2.5-7b-instruct-q4_0-00001-of-00002.gguf",
    "qwen2.5-7b-instruct-q4_0-00002-of-00002.gguf",
    "qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf",
    "qwen2.5-7b-instruct-q4_k_m-00002-of-00002.gguf",
    "qwen2.5-7b-instruct-q5_0-00001-of-00002.gguf",
    "qwen2.5-7b-instruct-q5_0-00002-of-00002.gguf",
    "qwen2.5-7b-instruct-q5_k_m-00001-of-00002.gguf",
    "qwen2.5-7b-instruct-q5_k_m-00002-of-00002.gguf",
    "qwen2.5-7b-instruct-q6_k-00001-of-00002.gguf",
    "qwen2.5-7b-instruct-q6_k-00002-of-00002.gguf",
    "qwen2.5-7b-instruct-q8_0-00001-of-00003.gguf",
    "qwen2.5-7b-instruct-q8_0-00002-of-00003.gguf",
    "qwen2.5-7b-instruct-q8_0-00003-of-00003.gguf",
]

# bartowski-style naming, with the big quantizations split into folders.
BARTOWSKI = "Llama-3.3-70B-Instruct"
BARTOWSKI_GGUF = [
    ".gitattributes",
    "README.md",
    f"{BARTOWSKI}-IQ2_XS.gguf",
    f"{BARTOWSKI}-IQ4_XS.gguf",
    f"{BARTOWSKI}-Q3_K_L.gguf",
    f"{BARTOWSKI}-Q4_0.gguf",
    f"{BARTOWSKI}-Q4_0_4_4.gguf",
    f"{BARTOWSKI}-Q4_K_L.gguf",
    f"{BARTOWSKI}-Q4_K_M.gguf",
    f"{BARTOWSKI}-Q4_K_S.gguf",
    f"{BARTOWSKI}-Q5_K_M/{BARTOWSKI}-Q5_K_M-00001-of-00002.gguf",
    f"{BARTOWSKI}-Q5_K_M/{BARTOWSKI}-Q5_K_M-00002-of-00002.gguf",
    f"{BARTOWSKI}-Q6_K_L/{BARTOWSKI}-Q6_K_L-00001-of-00002.gguf",
    f"{BARTOWSKI}-Q6_K_L/{BARTOWSKI}-Q6_K_L-00002-of-00002.gguf",
    f"{BARTOWSKI}-Q8_0/{BARTOWSKI}-Q8_0-00001-of-00002.gguf",
    f"{BARTOWSKI}-Q8_0/{BARTOWSKI}-Q8_0-00002-of-00002.gguf",
]


def test_a_llama_repository_keeps_only_safetensors_and_companions() -> None:
    selection = select_files(LLAMA)
    assert selection.accepted
    assert selection.refusal is None
    assert selection.format is WeightsFormat.SAFETENSORS
    assert set(selection.files) == LLAMA_SAFETENSORS | LLAMA_COMPANIONS
    assert list(selection.files) == sorted(selection.files)


def test_every_alternative_export_of_the_weights_is_left_out() -> None:
    selection = select_files(GPT2)
    assert selection.format is WeightsFormat.SAFETENSORS
    assert set(selection.files) == GPT2_SELECTED


def test_a_diffusers_pipeline_keeps_every_component() -> None:
    selection = select_files(DIFFUSERS)
    assert selection.format is WeightsFormat.DIFFUSERS
    assert set(selection.files) == DIFFUSERS_SELECTED


def test_stable_diffusion_keeps_the_pipeline_without_pickles() -> None:
    # runwayml/stable-diffusion-v1-5 as listed by the Hub.
    parts = ("safety_checker", "text_encoder", "unet", "vae")
    listing = [
        ".gitattributes",
        "README.md",
        "model_index.json",
        "v1-inference.yaml",
        "v1-5-pruned-emaonly.ckpt",
        "v1-5-pruned.ckpt",
        "feature_extractor/preprocessor_config.json",
        "scheduler/scheduler_config.json",
        "tokenizer/vocab.json",
        *(f"{part}/config.json" for part in parts),
        *(f"{part}/model.safetensors" for part in parts[:2]),
        *(f"{part}/model.fp16.safetensors" for part in parts[:2]),
        *(f"{part}/pytorch_model.bin" for part in parts[:2]),
        *(f"{part}/pytorch_model.fp16.bin" for part in parts[:2]),
        *(f"{part}/diffusion_pytorch_model.safetensors" for part in parts[2:]),
        *(f"{part}/diffusion_pytorch_model.fp16.safetensors" for part in parts[2:]),
        *(f"{part}/diffusion_pytorch_model.bin" for part in parts[2:]),
        *(f"{part}/diffusion_pytorch_model.fp16.bin" for part in parts[2:]),
    ]
    selection = select_files(listing)
    assert selection.format is WeightsFormat.DIFFUSERS
    assert {weight_format(path) for path in selection.files} == {"safetensors", None}
    for part in parts:
        assert f"{part}/config.json" in selection.files
        assert any(path.startswith(f"{part}/") and path.endswith(".safetensors") for path in selection.files)
    for companion in ("model_index.json", "scheduler/scheduler_config.json", "tokenizer/vocab.json"):
        assert companion in selection.files


def test_a_gguf_repository_gives_the_preferred_quantization_with_all_its_shards() -> None:
    selection = select_files(QWEN_GGUF)
    assert selection.format is WeightsFormat.GGUF
    assert selection.files == (
        "LICENSE",
        "README.md",
        "qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf",
        "qwen2.5-7b-instruct-q4_k_m-00002-of-00002.gguf",
    )


def test_bartowski_naming_picks_q4_k_m_over_its_look_alikes() -> None:
    selection = select_files(BARTOWSKI_GGUF)
    assert selection.format is WeightsFormat.GGUF
    assert selection.files == (f"{BARTOWSKI}-Q4_K_M.gguf", "README.md")


@pytest.mark.parametrize(
    ("present", "expected"),
    [
        (["Q8_0", "Q5_K_M", "F16"], "Q5_K_M"),
        (["Q8_0", "BF16", "F16"], "Q8_0"),
        (["F16", "BF16"], "BF16"),
        (["Q6_K", "Q6_K_L"], "Q6_K"),
        (["Q4_0", "Q4_0_4_4", "Q4_0_8_8"], "Q4_0"),
        (["IQ4_XS", "F16"], "F16"),
        (["Q4_K_S", "Q4_K_M"], "Q4_K_M"),
    ],
)
def test_quantizations_are_taken_in_order_of_preference(present: list[str], expected: str) -> None:
    for style in ("Model-{}.gguf", "model.{}.gguf", "model_{}.gguf", "model-{}-00001-of-00001.gguf"):
        for lower in (False, True):
            names = [style.format(marker.lower() if lower else marker) for marker in present]
            chosen = style.format(expected.lower() if lower else expected)
            selection = select_files(names)
            assert selection.files == (chosen,), (style, lower)


def test_the_preference_list_ranks_every_marker() -> None:
    names = [f"model-{marker}.gguf" for marker in reversed(GGUF_PREFERENCE)]
    for marker in GGUF_PREFERENCE:
        assert select_files(names).files == (f"model-{marker}.gguf",)
        names.remove(f"model-{marker}.gguf")


def test_without_a_preferred_marker_the_choice_is_deterministic() -> None:
    listing = ["README.md", "model-IQ3_M.gguf", "model-IQ2_XXS.gguf", "model-IQ4_XS.gguf", "model-TQ1_0.gguf"]
    first = select_files(listing)
    assert first.format is WeightsFormat.GGUF
    assert len([path for path in first.files if path.endswith(".gguf")]) == 1
    for rotation in range(len(listing)):
        assert select_files(listing[rotation:] + listing[:rotation]) == first
    assert select_files(reversed(listing)) == first


def test_a_single_unmarked_gguf_and_its_shards_are_taken_whole() -> None:
    assert select_files(["tiny.gguf", "README.md"]).files == ("README.md", "tiny.gguf")
    shards = [f"big-0000{index}-of-00003.gguf" for index in (3, 1, 2)]
    assert select_files(shards).files == tuple(sorted(shards))


def test_a_quantization_offered_whole_and_split_is_taken_once() -> None:
    whole = "model-Q4_K_M.gguf"
    split = ["model-Q4_K_M-00001-of-00002.gguf", "model-Q4_K_M-00002-of-00002.gguf"]
    other_split = [f"model-Q4_K_M-0000{index}-of-00003.gguf" for index in (1, 2, 3)]
    for listing in (
        [whole, *split],
        [whole, *other_split],
        [*split, *other_split],
        [whole, *split, *other_split],
    ):
        selection = select_files(listing)
        assert selection.files in {(whole,), tuple(split), tuple(other_split)}, listing
        assert select_files(reversed(listing)) == selection


def test_safetensors_win_over_gguf_in_one_repository() -> None:
    selection = select_files(["config.json", "model.safetensors", "model-Q4_K_M.gguf"])
    assert selection.format is WeightsFormat.SAFETENSORS
    assert selection.files == ("config.json", "model.safetensors")


@pytest.mark.parametrize(
    "listing",
    [
        [],
        ["README.md", ".gitattributes"],
        ["config.json", "pytorch_model.bin", "tokenizer.json"],
        ["config.json", "pytorch_model-00001-of-00002.bin", "pytorch_model-00002-of-00002.bin"],
        ["original/consolidated.00.pth", "original/params.json"],
        ["model.onnx", "onnx/model.onnx", "config.json"],
        ["tf_model.h5", "flax_model.msgpack", "rust_model.ot"],
        ["model.ckpt", "model.pt", "weights.pkl"],
        ["model.safetensors.index.json", "model.gguf.txt"],
        ["model.tar", "model.zip", "model.tar.gz"],
    ],
)
def test_a_repository_without_safetensors_or_gguf_is_refused(listing: list[str]) -> None:
    selection = select_files(listing)
    assert not selection.accepted
    assert selection == Selection(files=(), format=None, refusal=selection.refusal)
    assert selection.refusal is not None
    assert "safetensors" in selection.refusal
    assert "GGUF" in selection.refusal


@pytest.mark.parametrize(
    "left_out",
    [
        "convert.py",
        "scripts/train.sh",
        "notebooks/demo.ipynb",
        "assets/logo.png",
        "assets/LOGO.PNG",
        "sample.jpg",
        "figure.jpeg",
        "anim.gif",
        "hero.webp",
        "diagram.svg",
        "paper.pdf",
        "weights.zip",
        "weights.tar",
        "weights.tar.gz",
        "weights.tgz",
        "weights.7z",
        "weights.tar.zst",
        "libkernel.so",
        "kernel.dll",
        "setup.exe",
        "plugin.jar",
        "module.wasm",
        ".gitattributes",
        ".gitignore",
        ".github/workflows/ci.yml",
        "sub/.gitkeep",
        "openvino/openvino_model.xml",
        "coreml/model.mlpackage/Manifest.json",
    ],
)
def test_scripts_images_archives_and_binaries_are_left_out(left_out: str) -> None:
    selection = select_files(["config.json", "model.safetensors", left_out])
    assert selection.files == ("config.json", "model.safetensors")


def test_the_listing_may_repeat_paths_and_come_in_any_order() -> None:
    assert select_files([*reversed(LLAMA), *LLAMA]) == select_files(LLAMA)


def test_directory_entries_are_not_files() -> None:
    assert select_files(["model.safetensors", "tokenizer/", "tokenizer/vocab.json"]).files == (
        "model.safetensors",
        "tokenizer/vocab.json",
    )


def split_of(path: str) -> tuple[str, str | None]:
    """The file a GGUF shard belongs to and how many shards it has; (path, None) when unsplit."""
    shard = re.fullmatch(r"(.*)-\d{5}-of-(\d{5})\.gguf", path, re.IGNORECASE)
    return (shard.group(1), shard.group(2)) if shard else (path, None)


SEGMENTS = st.sampled_from(
    ["", "original/", "onnx/", "unet/", "vae/", "sub/dir/", ".git/", "coreml/", "Model-Q4_K_M/"]
)
STEMS = st.sampled_from(
    ["model", "model-00001-of-00002", "model-00002-of-00002", "pytorch_model", "Model-Q4_K_M", "model.Q8_0",
     "model-IQ2_XS", "x-Q4_K_M-00001-of-00002", "x-Q4_K_M-00002-of-00002", "x-Q4_K_M-00001-of-00003",
     "config", "tokenizer", "README", "model_index", "rust_model", "LICENSE"]
)  # fmt: skip
EXTENSIONS = st.sampled_from(
    [*WEIGHT_EXTENSIONS, ".json", ".txt", ".md", ".model", ".py", ".png", ".zip", ".tar.gz", "",
     ".SAFETENSORS", ".GGUF", "/"]
)  # fmt: skip
PATHS = st.lists(st.builds(lambda a, b, c: a + b + c, SEGMENTS, STEMS, EXTENSIONS), max_size=25)


@given(listing=PATHS, data=st.data())
@BOUNDED
def test_the_selection_is_one_format_taken_from_the_listing(listing: list[str], data: st.DataObject) -> None:
    selection = select_files(listing)
    assert set(selection.files) <= set(listing)
    assert len(set(selection.files)) == len(selection.files)
    formats = {weight_format(path) for path in selection.files} - {None}
    assert len(formats) <= 1
    has_weights = any(weight_format(path) in ("safetensors", "gguf") for path in listing)
    assert selection.accepted is has_weights
    if not selection.accepted:
        assert selection.files == ()
        assert selection.format is None
        return
    assert formats == {"gguf" if selection.format is WeightsFormat.GGUF else "safetensors"}
    if selection.format is WeightsFormat.GGUF:
        variants = {split_of(path) for path in selection.files if weight_format(path) == "gguf"}
        assert len(variants) == 1
    assert select_files(data.draw(st.permutations(listing))) == selection


def test_mistral_consolidated_weights_are_left_out_beside_the_hugging_face_shards() -> None:
    listing = [
        "config.json",
        "consolidated.safetensors",
        "model-00001-of-00002.safetensors",
        "model-00002-of-00002.safetensors",
        "params.json",
        "tokenizer.json",
    ]
    assert "consolidated.safetensors" not in select_files(listing).files
    assert select_files(["consolidated.safetensors", "params.json"]).files == (
        "consolidated.safetensors",
        "params.json",
    )


def test_a_diffusers_pipeline_keeps_one_copy_of_each_component() -> None:
    listing = [
        "model_index.json",
        "v1-5-pruned-emaonly.safetensors",
        "unet/config.json",
        "unet/diffusion_pytorch_model.safetensors",
        "unet/diffusion_pytorch_model.fp16.safetensors",
        "unet/diffusion_pytorch_model.non_ema.safetensors",
        "vae/diffusion_pytorch_model.safetensors",
        "text_encoder/model.fp16.safetensors",
    ]
    assert select_files(listing).files == (
        "model_index.json",
        "text_encoder/model.fp16.safetensors",  # the only copy of that component
        "unet/config.json",
        "unet/diffusion_pytorch_model.safetensors",
        "vae/diffusion_pytorch_model.safetensors",
    )


def test_a_vision_projector_travels_with_the_chosen_quantization() -> None:
    listing = ["m.Q4_K_M.gguf", "m.Q8_0.gguf", "mmproj-m-f16.gguf", "README.md"]
    assert select_files(listing).files == ("README.md", "m.Q4_K_M.gguf", "mmproj-m-f16.gguf")


def test_weights_under_folders_of_other_exports_are_copies_unless_they_are_all() -> None:
    assert select_files(["model.safetensors", "original/model.safetensors"]).files == ("model.safetensors",)
    assert select_files(["original/model.safetensors"]).files == ("original/model.safetensors",)
