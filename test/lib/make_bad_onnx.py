"""Writes deliberately broken or unsupported ONNX models for error tests.

Usage: make_bad_onnx.py KIND OUT_DIR
"""
import os
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def small_model(nodes, inputs, outputs, inits=(), opset=17):
    graph = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def main():
    kind, out = sys.argv[1], sys.argv[2]
    os.makedirs(out, exist_ok=True)
    x = helper.make_tensor_value_info("input", TensorProto.FLOAT, [4, 8])
    y = helper.make_tensor_value_info("output", TensorProto.FLOAT, [4, 8])
    path = os.path.join(out, "model.onnx")
    if kind == "unsupported":
        node = helper.make_node("Hardmax", ["input"], ["output"], name="/head/Hardmax")
        onnx.save(small_model([node], [x], [y]), path)
    elif kind == "old-opset":
        node = helper.make_node("Relu", ["input"], ["output"], name="/act/Relu")
        onnx.save(small_model([node], [x], [y], opset=5), path)
    elif kind == "escape":
        w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
        node = helper.make_node("MatMul", ["input", "w"], ["output"], name="/fc/MatMul")
        model = small_model([node], [x], [y], [w])
        onnx.save_model(model, path, save_as_external_data=True,
                        all_tensors_to_one_file=True, location="w.data",
                        size_threshold=0)
        model = onnx.load(path, load_external_data=False)
        for t in model.graph.initializer:
            for entry in t.external_data:
                if entry.key == "location":
                    entry.value = "../w.data"
        with open(path, "wb") as f:
            f.write(model.SerializeToString())
    elif kind == "truncated":
        w = numpy_helper.from_array(np.ones((64, 64), np.float32), "w")
        node = helper.make_node("MatMul", ["input", "w"], ["output"])
        data = small_model([node], [helper.make_tensor_value_info(
            "input", TensorProto.FLOAT, [4, 64])], [y], [w]).SerializeToString()
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
    elif kind == "bad-metadata":
        w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
        node = helper.make_node("MatMul", ["input", "w"], ["output"])
        model = small_model([node], [x], [y], [w])
        entry = model.metadata_props.add()
        entry.key, entry.value = "weft.parameters", '{"w": 1}'
        onnx.save(model, path)
    elif kind == "bad-name":
        # A damaged file: the node's name holds a terminal escape and a bell
        # (patched into the serialized bytes; protobuf itself refuses
        # invalid UTF-8).
        node = helper.make_node("Hardmax", ["input"], ["output"], name="/head/QQQQQ")
        data = small_model([node], [x], [y]).SerializeToString()
        with open(path, "wb") as f:
            f.write(data.replace(b"QQQQQ", b"\x1b[2J\x07"))
    elif kind == "garbage":
        with open(path, "wb") as f:
            f.write(bytes(range(256)) * 8)
    else:
        sys.exit("unknown kind " + kind)


if __name__ == "__main__":
    main()
