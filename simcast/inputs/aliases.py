"""Instruct/Chat model names that resolve to a shipped base config with the same architecture and shapes.

``--model meta-llama/Llama-3.1-8B-Instruct`` then runs on ``models/meta-llama/Llama-3.1-8B/config.json``
under the name the user gave (launch lines serve the Instruct checkpoint), and the CLI says so in one
stderr note (:func:`alias_note`).
"""

from __future__ import annotations

from pathlib import Path

from simcast.inputs.files import is_dir, is_file, package_data_dir


def models_dir() -> Path:
    """The shipped model configs (package data ``simcast/data/models``; the repository's ``models`` links
    there); ``SIMCAST_MODELS_DIR`` overrides it."""
    import os

    env = os.environ.get("SIMCAST_MODELS_DIR")
    return Path(env) if env else package_data_dir("models")


MODEL_ALIASES: dict[str, str] = {
    # Instruct/Chat name -> shipped base id. Each pair's Hugging Face config.json files
    # (https://huggingface.co/<id>/blob/main/config.json) agree on architectures, hidden_size,
    # intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
    # vocab_size, tie_word_embeddings and torch_dtype; they differ in token ids (eos_token_id) only, which
    # leave a step's cost unchanged. Not aliased on purpose: Mixtral-8x22B-Instruct-v0.1 (vocab 32768
    # against the base's 32000), Qwen3 *-Instruct-2507 (other rope_theta and context length).
    "meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B",
    "meta-llama/Meta-Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B",
    "meta-llama/Llama-3.1-70B-Instruct": "meta-llama/Llama-3.1-70B",
    "meta-llama/Meta-Llama-3.1-70B-Instruct": "meta-llama/Llama-3.1-70B",
    "meta-llama/Llama-3.1-405B-Instruct": "meta-llama/Llama-3.1-405B",
    "meta-llama/Meta-Llama-3.1-405B-Instruct": "meta-llama/Llama-3.1-405B",
    "meta-llama/Llama-3.2-1B-Instruct": "meta-llama/Llama-3.2-1B",
    "meta-llama/Llama-3.2-3B-Instruct": "meta-llama/Llama-3.2-3B",
    "meta-llama/Llama-2-7b-chat-hf": "meta-llama/Llama-2-7b-hf",
    "meta-llama/Llama-2-13b-chat-hf": "meta-llama/Llama-2-13b-hf",
    "meta-llama/Llama-2-70b-chat-hf": "meta-llama/Llama-2-70b-hf",
    "Qwen/Qwen2.5-7B-Instruct": "Qwen/Qwen2.5-7B",
    "Qwen/Qwen2.5-32B-Instruct": "Qwen/Qwen2.5-32B",
    "Qwen/Qwen2.5-72B-Instruct": "Qwen/Qwen2.5-72B",
    "mistralai/Mistral-7B-Instruct-v0.3": "mistralai/Mistral-7B-v0.3",
    "mistralai/Mixtral-8x7B-Instruct-v0.1": "mistralai/Mixtral-8x7B-v0.1",
    # DeepSeek's later checkpoints of the V3 architecture (DeepseekV3ForCausalLM: 61 layers, hidden 7168, MLA with
    # kv_lora_rank 512, 256 routed experts + 1 shared, top-8, one MTP layer, block-FP8 weights): R1 and R1-0528
    # (RL on V3-Base), V3-0324, V3.1 and V3.1-Terminus (continued training of V3-Base; the model cards: "same
    # architecture"); their config.json files differ from V3's in token ids and chat fields only.
    "deepseek-ai/DeepSeek-V3-0324": "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-V3.1": "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-V3.1-Terminus": "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1": "deepseek-ai/DeepSeek-V3",
    "deepseek-ai/DeepSeek-R1-0528": "deepseek-ai/DeepSeek-V3",
    # GLM-4.6 keeps GLM-4.5's architecture (zai-org/GLM-4.5 README @ 170f20b2: 355B / 32B for 4.5, 4.6 and 4.7; one
    # glm4_moe implementation in transformers, vLLM and SGLang); its config raises the context to 200K only
    # (max_position_embeddings, which leaves a step's cost unchanged).
    "zai-org/GLM-4.6": "zai-org/GLM-4.5",
    # Kimi-K2-Instruct-0905: the same architecture, context raised to 256K (its README "Model Summary").
    "moonshotai/Kimi-K2-Instruct-0905": "moonshotai/Kimi-K2-Instruct",
}
"""Instruct/Chat variants served under their own name with the shipped base's config (same shapes)."""


def model_alias(name: str) -> str | None:
    """The shipped base id ``name`` resolves to, or None (a shipped model, a path, or no alias)."""
    base = MODEL_ALIASES.get(name)
    if base is None or is_file(name, "--model") or is_dir(name, "--model"):
        return None  # a path of the user's own wins
    if is_file(models_dir() / name / "config.json", "--model"):
        return None  # shipped under its own name
    return base


def alias_note(name: str) -> str | None:
    """The one stderr line saying that ``name`` runs on its base's config (None when not an alias)."""
    base = model_alias(name)
    if base is None:
        return None
    return (
        f"simcast: note: {name} uses the shipped {base} config (same architecture and shapes; "
        "only token ids differ); reported under the name you gave"
    )


DEVICE_ALIASES: dict[str, str] = {
    # how benchmarks and launch scripts name the parts (already lower-cased, '-' and ' ' as '_') -> profile.
    # "H100"/"H200" in serving benchmarks are the SXM (HGX) boards (the PCIe/NVL cards have other profiles or
    # none); the NVL72 racks' GPUs are the gb200/gb300 profiles (devices_per_node: the NVLink domain).
    "h100": "h100_sxm",
    "h100_sxm5": "h100_sxm",
    "h100_hgx": "h100_sxm",
    "h200": "h200_sxm",
    "h200_hgx": "h200_sxm",
    "b200_hgx": "b200",
    "b300_hgx": "b300",
    "gb200_nvl72": "gb200",
    "gb300_nvl72": "gb300",
    "a100": "a100_sxm_80gb",
    "a100_80gb": "a100_sxm_80gb",
    "instinct_mi300x": "mi300x",
    "instinct_mi325x": "mi325x",
    "instinct_mi355x": "mi355x",
}
"""Other spellings of shipped device profiles: :func:`device_profile_name` resolves them (case and ``-``/``_``
are ignored too: ``--device H200``, ``GB300``, ``MI355X``, ``gb200-nvl72`` all work)."""


def device_profile_name(name: str) -> str:
    """The shipped profile a ``--device`` spelling names: lower-cased, ``-`` and spaces as ``_``, then
    :data:`DEVICE_ALIASES` (a name that is no alias comes back normalised, and may still not exist)."""
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    return DEVICE_ALIASES.get(key, key)
