//===- sluice-opt.cpp - Sluice's opt-style driver -------------------------===//
//
// Parses IR, runs the requested passes, prints the result. Registers exactly
// the sluice dialect and the sluice passes: nothing a user of Sluice would
// not meet in its pipelines.
//
//===----------------------------------------------------------------------===//

#include "sluice/SluiceDialect.h"
#include "sluice/Transforms/Passes.h"
#include "sluice/Transforms/Pipeline.h"
#include "sluice/Version.h"

#include "mlir/IR/DialectRegistry.h"
#include "mlir/Tools/mlir-opt/MlirOptMain.h"

int main(int argc, char **argv) {
  mlir::DialectRegistry registry;
  registry.insert<mlir::sluice::SluiceDialect>();
  mlir::sluice::registerSluicePasses();
  mlir::sluice::registerSluicePipeline();
  ::sluice::setVersionPrinter();
  return mlir::asMainReturnCode(
      mlir::MlirOptMain(argc, argv, "Sluice optimizer driver\n", registry));
}
