//===- Version.h - Weft's version ---------------------------------*- C++ -*-===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//

#ifndef WEFT_SUPPORT_VERSION_H
#define WEFT_SUPPORT_VERSION_H

namespace weft {

/// CMake's project(VERSION), e.g. "0.2.0": printed by every tool's
/// --version and recorded in each compiled model's JSON.
const char *getWeftVersion();

} // namespace weft

#endif // WEFT_SUPPORT_VERSION_H
