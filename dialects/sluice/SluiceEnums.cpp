//===- SluiceEnums.cpp - The dialect's plain enums ------------------------===//

#include "sluice/SluiceEnums.h"

#include "llvm/ADT/StringSwitch.h"

#include "sluice/SluiceEnums.cpp.inc"
