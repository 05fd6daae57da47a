// The enum attributes of the later IR levels parse and print in their own
// syntax, so that IR written today stays valid.
// RUN: sluice-opt %s | sluice-opt | FileCheck %s

// CHECK-LABEL: module attributes
// CHECK-SAME: sluice.b = #sluice.pass<B>
// CHECK-SAME: sluice.bw = #sluice.pass<BW>
// CHECK-SAME: sluice.f = #sluice.pass<F>
// CHECK-SAME: sluice.ib = #sluice.pass<IB>
// CHECK-SAME: sluice.if = #sluice.pass<IF>
// CHECK-SAME: sluice.max = #sluice.reduction<max>
// CHECK-SAME: sluice.s = #sluice.pass<S>
// CHECK-SAME: sluice.sum = #sluice.reduction<sum>
// CHECK-SAME: sluice.t = #sluice.pass<T>
// CHECK-SAME: sluice.w = #sluice.pass<W>
module attributes {
  sluice.f = #sluice.pass<F>, sluice.b = #sluice.pass<B>,
  sluice.w = #sluice.pass<W>, sluice.bw = #sluice.pass<BW>,
  sluice.s = #sluice.pass<S>, sluice.t = #sluice.pass<T>,
  sluice.if = #sluice.pass<IF>, sluice.ib = #sluice.pass<IB>,
  sluice.max = #sluice.reduction<max>, sluice.sum = #sluice.reduction<sum>
} {}
