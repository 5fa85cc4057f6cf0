"""Export a PyTorch model to ONNX for training with Weft.

    import weft_export
    weft_export.export(model, (x,), "model.onnx")      # then: weftc model.onnx -o train

ONNX does not say which tensors PyTorch trains, and torch.onnx.export's
defaults lose what Weft needs to know: in eval mode it merges parameters
that hold equal values (LayerNorm weights of ones, zero biases, the clones
inside nn.TransformerEncoder), folds each BatchNorm into the convolution
before it and drops Dropout; with constant folding it renames weights it
pre-transposes (`onnx::MatMul_254`). This helper calls torch.onnx.export
with the user's own PyTorch and arguments and

- defaults to `training=torch.onnx.TrainingMode.TRAINING` (the graph
  PyTorch trains: BatchNorm with batch statistics, Dropout kept) and
  `do_constant_folding=False` (every parameter keeps its name; Weft folds
  constants itself) — pass either to override;
- leaves the model's buffers as they were (tracing in train mode runs
  BatchNorm, which updates its running statistics) and writes those values;
- records in the model's `metadata_props`:
    weft.parameters  JSON list of `named_parameters()` names (tied
                     parameters once, under their first name),
    weft.buffers     JSON list of `named_buffers()` names,
    weft.renamed     JSON object {graph name: {"name": state_dict name,
                     "transpose": bool}} for initializers the exporter
                     renamed (only with constant folding),
    weft.aliases     JSON object {state_dict name: parameter name} for the
                     state_dict entries that are a tied parameter under a
                     second name (`lm_head.weight` -> `wte.weight`), so
                     `weft-ckpt export` writes a state_dict that
                     `load_state_dict(strict=True)` takes,
  which `weftc` honours: listed parameters train, listed buffers load but
  never train, and checkpoints use PyTorch's state_dict names.

Needs torch and onnx. `f` may be a path or a binary file object.
"""

import copy
import io
import json
import os

import torch

PARAMETERS_KEY = "weft.parameters"
BUFFERS_KEY = "weft.buffers"
RENAMED_KEY = "weft.renamed"
ALIASES_KEY = "weft.aliases"


def _aliases(model):
    """{state_dict key: parameter name} for keys that name a parameter
    already listed under another name (tied weights)."""
    first = {}
    for name, p in model.named_parameters():
        first.setdefault(id(p), name)
    aliases = {}
    for key, value in model.state_dict(keep_vars=True).items():
        owner = first.get(id(value))
        if owner is not None and owner != key:
            aliases[key] = owner
    return aliases


def _renamed(model, args, kwargs, param_names):
    """Maps the exporter's generated initializer names to PyTorch names.

    Equal values (clones, ones, zeros) make a value match ambiguous, so this
    exports a copy whose every parameter holds distinct values and matches
    that export's initializers, which carry the same generated names."""
    import onnx
    from onnx import numpy_helper

    probe = copy.deepcopy(model)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for prm in probe.parameters():
            prm.copy_(torch.rand(prm.shape, generator=g, dtype=torch.float64)
                      .to(prm.dtype) + 1.0)
    buf = io.BytesIO()
    torch.onnx.export(probe, args, buf, **kwargs)
    graph = onnx.load_from_string(buf.getvalue()).graph
    values = {p_name: prm.detach().cpu().numpy()
              for p_name, prm in probe.named_parameters()}
    renamed = {}
    for init in graph.initializer:
        if init.name in param_names:
            continue
        value = numpy_helper.to_array(init)
        for p_name, p_value in values.items():
            if value.shape == p_value.shape and (value == p_value).all():
                renamed[init.name] = {"name": p_name, "transpose": False}
                break
            if (value.ndim == 2 and value.shape == p_value.T.shape
                    and (value == p_value.T).all()):
                renamed[init.name] = {"name": p_name, "transpose": True}
                break
    return renamed


def export(model, args, f, **kwargs):
    """torch.onnx.export(model, args, f, **kwargs) for training with Weft:
    see the module's documentation for the defaults and the metadata."""
    import onnx

    kwargs.setdefault("training", torch.onnx.TrainingMode.TRAINING)
    kwargs.setdefault("do_constant_folding", False)
    if not isinstance(args, tuple):
        args = (args,)
    was_training = model.training
    # Tracing in train mode runs BatchNorm, which updates the running
    # statistics in place: keep the model's (and the file's) as they were.
    buffers = {n: b.detach().clone() for n, b in model.named_buffers()}
    buf = io.BytesIO()
    try:
        torch.onnx.export(model, args, buf, **kwargs)
        param_names = [n for n, _ in model.named_parameters()]
        aliases = _aliases(model)
        renamed = {}
        if kwargs["do_constant_folding"]:
            renamed = _renamed(model, args, kwargs, set(param_names))
    finally:
        model.train(was_training)
        with torch.no_grad():
            for n, b in model.named_buffers():
                b.copy_(buffers[n])

    proto = onnx.load_from_string(buf.getvalue())
    from onnx import numpy_helper
    for init in proto.graph.initializer:
        if init.name in buffers:
            init.CopyFrom(numpy_helper.from_array(
                buffers[init.name].cpu().numpy(), init.name))
    keep = [e for e in proto.metadata_props
            if e.key not in (PARAMETERS_KEY, BUFFERS_KEY, RENAMED_KEY,
                             ALIASES_KEY)]
    del proto.metadata_props[:]
    proto.metadata_props.extend(keep)
    for key, value in ((PARAMETERS_KEY, param_names),
                       (BUFFERS_KEY, [n for n, _ in model.named_buffers()]),
                       (RENAMED_KEY, renamed),
                       (ALIASES_KEY, aliases)):
        entry = proto.metadata_props.add()
        entry.key = key
        entry.value = json.dumps(value)
    data = proto.SerializeToString()
    if isinstance(f, (str, os.PathLike)):
        with open(f, "wb") as out:
            out.write(data)
    else:
        f.write(data)
