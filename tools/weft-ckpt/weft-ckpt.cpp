//===- weft-ckpt.cpp - Inspect and export training checkpoints ------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
//   weft-ckpt info CKPT                 what a checkpoint holds
//   weft-ckpt export CKPT -o FILE       its model as a PyTorch state_dict
//
// CKPT is one checkpoint (step-N) or a checkpoint folder, meaning its newest
// usable checkpoint. A sharded checkpoint (one part per rank) is exported
// as global tensors, assembled from its blocks.
//
//===----------------------------------------------------------------------===//

#include "weft/Formats/SafeTensors.h"
#include "weft/Runtime/Checkpoint.h"

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <filesystem>
#include <iostream>
#include <map>
#include <set>

using namespace weft::rt;
namespace fs = std::filesystem;

namespace {

int fail(const std::string &message) {
  std::cerr << "weft-ckpt: error: " << message << "\n";
  return 1;
}

/// Reads the checkpoint and prints what was skipped on the way.
bool load(const std::string &path, StoredCheckpoint &ckpt) {
  Status s = readCheckpoint(path, ckpt);
  for (const std::string &w : ckpt.warnings)
    std::cerr << "weft-ckpt: " << w << "\n";
  if (!s.ok()) {
    fail(s.message);
    return false;
  }
  return true;
}

int64_t microBatchesPerStep(const std::string &modelJson) {
  auto j = nlohmann::json::parse(modelJson, nullptr, false);
  if (j.is_object() && j.contains("accum_steps") &&
      j["accum_steps"].is_number_integer())
    return std::max<int64_t>(1, j["accum_steps"].get<int64_t>());
  return 1;
}

int info(const std::string &path) {
  StoredCheckpoint ckpt;
  if (!load(path, ckpt))
    return 1;
  std::map<std::string, std::pair<int, int64_t>> kinds;
  for (const StoredCheckpoint::Tensor &t : ckpt.tensors) {
    auto &[count, values] = kinds[t.kind];
    ++count;
    values += t.array.numElements();
  }
  std::cout << ckpt.path << ": step " << ckpt.meta.step << "\n";
  if (!ckpt.mesh.empty()) {
    std::string mesh;
    for (const ShardLayout::Axis &a : ckpt.mesh)
      mesh += (mesh.empty() ? "" : ",") + a.name + "=" + std::to_string(a.size);
    std::cout << "  mesh " << mesh << ", " << ckpt.numFiles
              << " part files\n";
  }
  for (const auto &[kind, stats] : kinds)
    std::cout << "  " << stats.first << " " << kind << " tensors, "
              << stats.second << " values\n";
  // A sharded tensor's layout as the model JSON spells it: per dim, the
  // mesh axes splitting it ("-" when whole). Those are dims of the view
  // the run held it in, when it had one.
  for (const StoredCheckpoint::Tensor &t : ckpt.tensors) {
    std::cout << "  " << t.kind << " " << quote(t.name) << " "
              << dtypeName(t.array.dtype) << " " << formatShape(t.array.shape);
    if (!t.viewShape.empty())
      std::cout << " viewed as " << formatShape(t.viewShape);
    bool split = false;
    for (const auto &axes : t.dims)
      split = split || !axes.empty();
    if (split) {
      std::string dims;
      for (const auto &axes : t.dims) {
        std::string d;
        for (const std::string &a : axes)
          d += (d.empty() ? "" : "*") + a;
        dims += (dims.empty() ? "" : ",") + (d.empty() ? "-" : d);
      }
      std::cout << " split [" << dims << "] in " << t.numBlocks << " blocks";
    }
    std::cout << "\n";
  }
  auto model = nlohmann::json::parse(ckpt.meta.modelJson, nullptr, false);
  if (model.is_object())
    for (const char *key : {"source", "optimizer", "loss", "weft_version"})
      if (model.contains(key) && model[key].is_string())
        std::cout << "  " << key << ": " << model[key].get<std::string>()
                  << "\n";
  return 0;
}

int exportStateDict(const std::string &path, const std::string &output) {
  StoredCheckpoint ckpt;
  if (!load(path, ckpt))
    return 1;
  fs::path out(output);
  if (out.has_parent_path() && !fs::is_directory(out.parent_path()))
    return fail("cannot write " + output + ": the folder " +
                out.parent_path().string() + " does not exist");
  std::error_code ec;
  for (const fs::directory_entry &e : fs::directory_iterator(ckpt.path, ec))
    if (fs::equivalent(out, e.path(), ec))
      return fail("-o " + output + " is the checkpoint's own file; refusing "
                                   "to overwrite it");
  SafeTensorsFile file;
  std::set<std::string> names;
  for (StoredCheckpoint::Tensor &t : ckpt.tensors)
    if (t.kind == "param" || t.kind == "buffer") {
      names.insert(t.name);
      file.tensors.emplace_back(t.name, std::move(t.array));
    }
  // PyTorch's BatchNorm also counts the batches it has normalized in train
  // mode, a buffer ONNX does not carry; load_state_dict(strict=True) needs
  // it. A model trained from scratch has seen steps x micro-batches.
  int64_t tracked = ckpt.meta.step * microBatchesPerStep(ckpt.meta.modelJson);
  std::vector<std::string> added;
  for (const std::string &name : names) {
    const std::string suffix = ".running_mean";
    if (name.size() <= suffix.size() ||
        name.compare(name.size() - suffix.size(), suffix.size(), suffix))
      continue;
    std::string module = name.substr(0, name.size() - suffix.size());
    if (!names.count(module + ".running_var") ||
        names.count(module + ".num_batches_tracked"))
      continue;
    HostArray count = HostArray::zeros(DType::I64, {});
    count.setFromDouble(0, double(tracked));
    file.tensors.emplace_back(module + ".num_batches_tracked",
                              std::move(count));
    added.push_back(module + ".num_batches_tracked");
  }
  // A tied parameter under its second name too (lm_head.weight as well as
  // wte.weight): state_dict lists both.
  auto model = nlohmann::json::parse(ckpt.meta.modelJson, nullptr, false);
  if (model.is_object() && model.contains("aliases") &&
      model["aliases"].is_object())
    for (auto it = model["aliases"].begin(); it != model["aliases"].end();
         ++it) {
      if (!it.value().is_string() || names.count(it.key()))
        continue;
      std::string target = it.value().get<std::string>();
      auto found = std::find_if(
          file.tensors.begin(), file.tensors.end(),
          [&](const auto &entry) { return entry.first == target; });
      if (found == file.tensors.end())
        continue;
      HostArray copy = found->second;
      file.tensors.emplace_back(it.key(), std::move(copy));
      names.insert(it.key());
    }
  file.metadata = {{"format", "pt"},
                   {"weft_step", std::to_string(ckpt.meta.step)}};
  if (Status s = writeSafeTensors(output, file); !s.ok())
    return fail(s.message);
  std::cerr << "weft-ckpt: wrote " << output << ": " << file.tensors.size()
            << " tensors of step " << ckpt.meta.step << " from " << ckpt.path
            << "\n";
  if (!added.empty())
    std::cerr << "weft-ckpt: note: " << added.size()
              << " BatchNorm num_batches_tracked set to " << tracked
              << " (steps x micro-batches, counting from a fresh model)\n";
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  CLI::App app{"weft-ckpt: inspect Weft training checkpoints and export them "
               "for PyTorch.\n\n"
               "  weft-ckpt info ckpt/\n"
               "  weft-ckpt export ckpt/ -o model.safetensors   # then, in "
               "Python:\n"
               "    model.load_state_dict(safetensors.torch.load_file("
               "'model.safetensors'), strict=True)\n",
               "weft-ckpt"};
  app.require_subcommand(1);
  std::string path, output;
  CLI::App *infoCmd = app.add_subcommand("info", "What a checkpoint holds");
  infoCmd->add_option("checkpoint", path,
                      "A checkpoint (step-N) or a checkpoint folder (its "
                      "newest usable checkpoint)")
      ->required();
  CLI::App *exportCmd = app.add_subcommand(
      "export", "Write the parameters and buffers, by PyTorch's state_dict "
                "names, to one safetensors file");
  exportCmd
      ->add_option("checkpoint", path,
                   "A checkpoint (step-N) or a checkpoint folder (its newest "
                   "usable checkpoint)")
      ->required();
  exportCmd->add_option("-o,--output", output, "The .safetensors file")
      ->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError &e) {
    return app.exit(e);
  }
  if (infoCmd->parsed())
    return info(path);
  return exportStateDict(path, output);
}
