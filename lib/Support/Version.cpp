//===- Version.cpp - Weft's version ---------------------------------------===//
//
// Part of the Weft project.
//
//===----------------------------------------------------------------------===//
//
// Only this file sees WEFT_VERSION_NUMBER, so a version bump recompiles one
// file rather than every object.
//
//===----------------------------------------------------------------------===//

#include "weft/Support/Version.h"

#define WEFT_STRINGIFY_(x) #x
#define WEFT_STRINGIFY(x) WEFT_STRINGIFY_(x)

const char *weft::getWeftVersion() {
  return WEFT_STRINGIFY(WEFT_VERSION_NUMBER);
}
