//===- TimelineSvg.cpp - SVG timeline like the papers' figures ------------===//

#include "sluice/Target/Export.h"

#include "llvm/Support/Format.h"
#include "llvm/Support/raw_ostream.h"

using namespace mlir;
using namespace mlir::sluice;

/// Fill colours per pass kind (Tableau 10, colour-blind safe).
/// Indexed by PassKind's value: F, B, W, BW, S, T, IF, IB, S2.
static llvm::StringRef getColor(PassKind kind) {
  static constexpr const char *kColors[] = {
      "#4e79a7", "#59a14f", "#f28e2b", "#76b7b2", "#b07aa1",
      "#ff9da7", "#9c755f", "#bab0ac", "#edc948"};
  static_assert(std::size(kColors) == getMaxEnumValForPassKind() + 1);
  return kColors[int(kind)];
}

std::string mlir::sluice::renderTimelineSvg(const sched::Pipeline &pipeline,
                                            const Simulation &simulation,
                                            llvm::StringRef title) {
  const double left = 70, top = 40, rowHeight = 26, plotWidth = 1100;
  const double legendHeight = 30;
  double width = left + plotWidth + 20;
  double height = top + rowHeight * pipeline.devices + legendHeight + 10;
  double scale = simulation.stepTime > 0 ? plotWidth / simulation.stepTime : 1;

  std::string svg;
  llvm::raw_string_ostream os(svg);
  os << llvm::format("<svg xmlns=\"http://www.w3.org/2000/svg\" "
                     "width=\"%.0f\" height=\"%.0f\" "
                     "font-family=\"sans-serif\">\n",
                     width, height);
  os << "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  os << llvm::format("<text x=\"%.0f\" y=\"22\" font-size=\"14\">", left)
     << title << "</text>\n";
  for (int d = 0; d < pipeline.devices; ++d) {
    double y = top + d * rowHeight;
    os << llvm::format("<text x=\"8\" y=\"%.1f\" font-size=\"12\">device "
                       "%d</text>\n",
                       y + rowHeight * 0.65, d);
    os << llvm::format("<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" "
                       "height=\"%.1f\" fill=\"#f4f4f4\"/>\n",
                       left, y + 2, plotWidth, rowHeight - 4);
  }
  for (const TimelineEvent &e : simulation.events) {
    if (e.kind != sched::InstrKind::Exec || e.end <= e.start)
      continue;
    double x = left + e.start * scale, w = (e.end - e.start) * scale;
    double y = top + e.device * rowHeight + 2;
    os << llvm::format("<rect x=\"%.2f\" y=\"%.1f\" width=\"%.2f\" "
                       "height=\"%.1f\" fill=\"%s\" stroke=\"white\" "
                       "stroke-width=\"0.5\"><title>",
                       x, y, w, rowHeight - 4, getColor(e.work.kind).data())
       << stringifyPassKind(e.work.kind)
       << (sched::isVocabPass(e.work.kind) ? " shard " : " stage ")
       << e.work.stage << " mb " << e.work.microbatch << " slice "
       << e.work.slice << "</title></rect>\n";
    // Label with the microbatch where the box is wide enough to read it.
    std::string label = std::to_string(e.work.microbatch);
    if (pipeline.slices > 1)
      label += "." + std::to_string(e.work.slice);
    if (w >= 7.0 * label.size())
      os << llvm::format("<text x=\"%.2f\" y=\"%.1f\" font-size=\"10\" "
                         "fill=\"white\" text-anchor=\"middle\">",
                         x + w / 2, y + rowHeight * 0.55)
         << label << "</text>\n";
  }
  double legendY = top + rowHeight * pipeline.devices + 20;
  double x = left;
  // The legend lists the kinds the timeline shows.
  llvm::SmallVector<PassKind> kinds(sched::getStagePasses(pipeline));
  if (pipeline.vocab.output)
    kinds.append(pipeline.vocab.getOutputPasses());
  if (pipeline.vocab.input)
    kinds.append({PassKind::IF, PassKind::IB});
  for (PassKind kind : kinds) {
    os << llvm::format("<rect x=\"%.0f\" y=\"%.0f\" width=\"14\" "
                       "height=\"14\" fill=\"%s\"/>",
                       x, legendY - 11, getColor(kind).data());
    os << llvm::format("<text x=\"%.0f\" y=\"%.0f\" font-size=\"12\">", x + 18,
                       legendY)
       << stringifyPassKind(kind) << "</text>\n";
    x += 60;
  }
  os << "</svg>\n";
  return svg;
}
