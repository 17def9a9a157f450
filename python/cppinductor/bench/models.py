"""The model suite (`--suite models`): HuggingFace transformers models built
from configs with random weights, nothing downloaded (HF_HUB_OFFLINE=1).

One model per family: decoder (GPT-2, LLaMA, Mistral with grouped-query
attention), encoder (BERT), encoder-decoder (T5), vision transformer (ViT),
convolutional (ConvNeXt, ResNet) and speech (wav2vec2, Whisper). Each runs
as inference (`<name>`: forward under no_grad) or training (`<name>_train`:
forward, a loss and backward; the step returns the loss and every
parameter's gradient). Results are judged against a float64 run of the same
weights, as PyTorch's own benchmark does: a backend passes where its error
from float64 is within twice eager's (reordered sums are not failures).

Sizes: on the CPU small configs (hidden 128, two layers); on CUDA, base
sizes (hidden 768, six layers). `--batch small` runs one short sequence
(latency), `--batch large` a batch (throughput).
"""

from __future__ import annotations

import copy
import os
from dataclasses import dataclass
from typing import Any, Callable, Dict, List, Tuple

import torch

from .workloads import Case, Compile, Workload

VOCAB = 1000


@dataclass(frozen=True)
class ModelSpec:
    name: str
    family: str
    inputs: str  # text | seq2seq | image | audio | speech
    build: Callable[[bool], Any]  # (large) -> an nn.Module (transformers), eval mode


def _transformers() -> Any:
    os.environ.setdefault("HF_HUB_OFFLINE", "1")  # nothing is ever fetched
    import transformers

    return transformers


def _text_dims(large: bool) -> Dict[str, int]:
    return {"hidden": 768, "layers": 6, "heads": 12, "ff": 3072} if large else \
        {"hidden": 128, "layers": 2, "heads": 4, "ff": 512}


def _gpt2(large: bool) -> Any:
    t, d = _transformers(), _text_dims(large)
    return t.GPT2LMHeadModel(t.GPT2Config(n_layer=d["layers"], n_embd=d["hidden"], n_head=d["heads"],
                                          vocab_size=VOCAB, n_positions=1024,
                                          bos_token_id=VOCAB - 1, eos_token_id=VOCAB - 1))


def _bert(large: bool) -> Any:
    t, d = _transformers(), _text_dims(large)
    return t.BertForMaskedLM(t.BertConfig(hidden_size=d["hidden"], num_hidden_layers=d["layers"],
                                          num_attention_heads=d["heads"], intermediate_size=d["ff"],
                                          vocab_size=VOCAB))


def _t5(large: bool) -> Any:
    t, d = _transformers(), _text_dims(large)
    return t.T5ForConditionalGeneration(t.T5Config(d_model=d["hidden"], d_ff=d["ff"], d_kv=d["hidden"] // d["heads"],
                                                   num_layers=d["layers"], num_decoder_layers=d["layers"],
                                                   num_heads=d["heads"], vocab_size=VOCAB))


def _llama_like(cls_name: str, config_name: str, kv_heads_divisor: int) -> Callable[[bool], Any]:
    def build(large: bool) -> Any:
        t, d = _transformers(), _text_dims(large)
        config = getattr(t, config_name)(hidden_size=d["hidden"], intermediate_size=d["ff"] * 2 // 3,
                                         num_hidden_layers=d["layers"], num_attention_heads=d["heads"],
                                         num_key_value_heads=d["heads"] // kv_heads_divisor, vocab_size=VOCAB)
        return getattr(t, cls_name)(config)

    return build


def _vit(large: bool) -> Any:
    t, d = _transformers(), _text_dims(large)
    return t.ViTModel(t.ViTConfig(image_size=224 if large else 64, patch_size=16, hidden_size=d["hidden"],
                                  num_hidden_layers=d["layers"], num_attention_heads=d["heads"],
                                  intermediate_size=d["ff"]))


def _convnext(large: bool) -> Any:
    t = _transformers()
    sizes = [96, 192, 384, 768] if large else [32, 64, 128, 256]
    return t.ConvNextModel(t.ConvNextConfig(depths=[2, 2, 6, 2] if large else [1, 1, 1, 1], hidden_sizes=sizes,
                                            image_size=224 if large else 64))


def _resnet(large: bool) -> Any:
    t = _transformers()
    sizes = [256, 512, 1024, 2048] if large else [32, 64, 128, 256]
    return t.ResNetModel(t.ResNetConfig(depths=[3, 4, 6, 3] if large else [1, 1, 1, 1], hidden_sizes=sizes,
                                        embedding_size=64 if large else 32,
                                        layer_type="bottleneck" if large else "basic"))


def _wav2vec2(large: bool) -> Any:
    t, d = _transformers(), _text_dims(large)
    return t.Wav2Vec2Model(t.Wav2Vec2Config(hidden_size=d["hidden"], num_hidden_layers=d["layers"],
                                            num_attention_heads=d["heads"], intermediate_size=d["ff"],
                                            conv_dim=(256, 256, 256) if large else (64, 64, 64),
                                            conv_stride=(5, 2, 2), conv_kernel=(10, 3, 3), num_feat_extract_layers=3,
                                            vocab_size=VOCAB, do_stable_layer_norm=True))


def _whisper(large: bool) -> Any:
    t, d = _transformers(), _text_dims(large)
    return t.WhisperModel(t.WhisperConfig(d_model=d["hidden"], encoder_layers=d["layers"], decoder_layers=d["layers"],
                                          encoder_attention_heads=d["heads"], decoder_attention_heads=d["heads"],
                                          encoder_ffn_dim=d["ff"], decoder_ffn_dim=d["ff"], num_mel_bins=80,
                                          max_source_positions=750 if large else 100, max_target_positions=448,
                                          vocab_size=VOCAB, pad_token_id=0, bos_token_id=1, eos_token_id=2,
                                          decoder_start_token_id=1))


SPECS: List[ModelSpec] = [
    ModelSpec("gpt2", "decoder", "text", _gpt2),
    ModelSpec("bert", "encoder", "text", _bert),
    ModelSpec("t5", "encoder-decoder", "seq2seq", _t5),
    ModelSpec("llama", "decoder", "text", _llama_like("LlamaForCausalLM", "LlamaConfig", 1)),
    ModelSpec("mistral", "decoder (grouped-query attention)", "text",
              _llama_like("MistralForCausalLM", "MistralConfig", 4)),
    ModelSpec("vit", "vision transformer", "image", _vit),
    ModelSpec("convnext", "convolutional", "image", _convnext),
    ModelSpec("resnet", "convolutional", "image", _resnet),
    ModelSpec("wav2vec2", "speech", "audio", _wav2vec2),
    ModelSpec("whisper", "speech encoder-decoder", "speech", _whisper),
]


def batch_shape(device: str, batch: str) -> Tuple[int, int]:
    """(batch, tokens) for --batch small | large on the device."""
    cuda = torch.device(device).type == "cuda"
    if batch == "small":
        return (1, 128) if cuda else (1, 32)
    return (64, 256) if cuda else (8, 128)


def make_inputs(spec: ModelSpec, device: str, dtype: torch.dtype, batch: str, large: bool,
                shape_of: str | None = None) -> Dict[str, torch.Tensor]:
    """The model's inputs on `device`, of the batch shape for `shape_of` (default: `device`)."""
    b, s = batch_shape(shape_of or device, batch)
    gen = torch.Generator(device=device).manual_seed(0)
    ids = lambda n: torch.randint(0, VOCAB, (b, n), generator=gen, device=device)  # noqa: E731
    floats = lambda *shape: torch.randn(*shape, generator=gen, device=device).to(dtype)  # noqa: E731
    if spec.inputs == "text":
        return {"input_ids": ids(s)}
    if spec.inputs == "seq2seq":
        return {"input_ids": ids(s), "decoder_input_ids": ids(s)}
    image = 224 if large else 64
    if spec.inputs == "image":
        return {"pixel_values": floats(b, 3, image, image)}
    if spec.inputs == "audio":
        return {"input_values": floats(b, 80 * s)}
    frames = 1500 if large else 200
    return {"input_features": floats(b, 80, frames), "decoder_input_ids": ids(min(s, 64))}


def main_output(out: Any) -> torch.Tensor:
    """A model's first output (logits, last hidden state)."""
    return out[0] if isinstance(out, (tuple, list)) else out.to_tuple()[0]


def _as(inputs: Dict[str, torch.Tensor], dtype: torch.dtype) -> Dict[str, torch.Tensor]:
    return {k: v.to(dtype) if v.is_floating_point() else v for k, v in inputs.items()}


def model_case(spec: ModelSpec, device: str, dtype: torch.dtype, batch: str, train: bool) -> Case:
    large = torch.device(device).type == "cuda"
    torch.manual_seed(0)
    model = spec.build(large).to(device=device, dtype=dtype).eval()
    inputs = make_inputs(spec, device, dtype, batch, large)
    b, s = batch_shape(device, batch)

    def run(module: Any, args: Dict[str, torch.Tensor], compiled: Callable[..., Any]) -> Any:
        if not train:
            with torch.no_grad():
                return main_output(compiled(**args))
        for p in module.parameters():
            p.grad = None
        loss = main_output(compiled(**args)).float().square().mean()
        loss.backward()
        # A parameter the loss does not reach (a pooler) has no gradient in
        # eager and a zero one compiled (the graph's unused outputs get zero
        # gradients): the same thing.
        return [loss.detach()] + [torch.zeros_like(p) if p.grad is None else p.grad for p in module.parameters()]

    def make_step(compile: Compile) -> Callable[[], Any]:
        compiled = compile(model)
        return lambda: run(model, inputs, compiled)

    def reference() -> Any:
        """The same step in float64, on a copy of the weights."""
        twin = copy.deepcopy(model).to(torch.float64)
        return run(twin, _as(inputs, torch.float64), twin)

    return Case(f"{b} x {s} tokens" if spec.inputs in ("text", "seq2seq") else f"batch {b}", make_step,
                reference=reference)


def workloads() -> List[Workload]:
    """Each model as an inference and a training workload of the models suite."""
    out = []
    for spec in SPECS:
        for train in (False, True):
            build = (lambda s, t: lambda sizes, device, dtype: model_case(s, device, dtype, sizes.model_batch, t))(
                spec, train)
            out.append(Workload(spec.name + ("_train" if train else ""), "train" if train else "model",
                                f"{spec.family} ({spec.name}), {'forward + backward' if train else 'forward'}",
                                build, not train, (1e-3, 1e-3), suite="models"))
    return out
