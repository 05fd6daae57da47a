"""FP8 through PyTorch's torch._scaled_mm on the same libcublasLt sluice loads
(the GPU queue's item 0, after fp8probe: tools/gpu/run.sh).

If PyTorch's FP8 GEMMs run here and sluice's are refused, the library is
fine and sluice's call is at fault; if PyTorch's are refused too, it is the
library / driver combination. Also: which libcublasLt and libnccl the
process maps, and whether cuBLASLt accepts scale pointers that are only 4-
or 8-byte aligned (Sluice's runs 1 and 2 packed them 4 bytes apart).

    python3 fp8_torch_probe.py        (about 20 s, mostly CUDA start-up)
"""
import ctypes
import sys

import torch


def mapped(names):
    seen = []
    with open("/proc/self/maps") as maps:
        for line in maps:
            path = line.split()[-1]
            if any(n in path for n in names) and path not in seen:
                seen.append(path)
    return seen


def attempt(description, fn, reference=None):
    try:
        out = fn()
        torch.cuda.synchronize()
        detail = ""
        if reference is not None:
            err = (out.float() - reference).abs().max().item()
            scale = reference.abs().max().item() or 1.0
            detail = f"max relative error {err / scale:.2e}"
        print(f"OK    {description} {detail}")
        return True
    except Exception as error:  # noqa: BLE001 -- report and go on
        first = str(error).strip().splitlines()[0] if str(error).strip() else repr(error)
        print(f"FAIL  {description}: {first[:400]}")
        return False


def main():
    dev = "cuda"
    print(f"torch {torch.__version__} (CUDA {torch.version.cuda}), "
          f"{torch.cuda.get_device_name()}, sm_{''.join(map(str, torch.cuda.get_device_capability()))}")
    torch.ones(1, device=dev).matmul(torch.ones(1, 1, device=dev))  # loads cuBLAS
    try:
        lt = ctypes.CDLL("libcublasLt.so.13")
        lt.cublasLtGetVersion.restype = ctypes.c_size_t
        print("cublasLt version (the one this process uses):", lt.cublasLtGetVersion())
    except OSError as error:
        print("cannot open libcublasLt.so.13:", error)
    for path in mapped(["cublasLt", "libnccl", "libcudart"]):
        print("mapped:", path)

    torch.manual_seed(0)
    m, k, n = 64, 48, 48  # SluiceCudaTests.Fp8Gemm's row-major shape, k padded
    a = torch.randn(m, k, device=dev).to(torch.float8_e4m3fn)
    w = torch.randn(n, k, device=dev)
    b = w.to(torch.float8_e4m3fn).t()  # column-major k x n: the TN form
    b5 = w.to(torch.float8_e5m2).t()
    ref = a.float() @ b.float()
    ref5 = a.float() @ b5.float()
    one = torch.tensor(1.0, device=dev)
    buf = torch.ones(8, device=dev)  # buf[1] is 4 bytes in, buf[2] 8 bytes
    results = [
        attempt("e4m3 x e4m3 -> bf16, own scale tensors",
                lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                         out_dtype=torch.bfloat16), ref),
        attempt("e4m3 x e4m3 -> f32",
                lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                         out_dtype=torch.float32), ref),
        attempt("e4m3 x e5m2 -> bf16",
                lambda: torch._scaled_mm(a, b5, scale_a=one, scale_b=one,
                                         out_dtype=torch.bfloat16), ref5),
        attempt("scales 4 and 8 bytes into one buffer (Sluice's runs 1-2)",
                lambda: torch._scaled_mm(a, b, scale_a=buf[1], scale_b=buf[2],
                                         out_dtype=torch.bfloat16), ref),
        attempt("fast accumulation",
                lambda: torch._scaled_mm(a, b, scale_a=one, scale_b=one,
                                         out_dtype=torch.bfloat16,
                                         use_fast_accum=True), ref),
    ]
    # The 1B step's QKV shape, timed against bf16 (is FP8 worth it here?).
    M, K, N = 8192, 2048, 3072
    x = torch.randn(M, K, device=dev)
    y = torch.randn(N, K, device=dev)
    x8, y8 = x.to(torch.float8_e4m3fn), y.to(torch.float8_e4m3fn).t()
    xb, yb = x.bfloat16(), y.bfloat16().t()

    def timed(fn, reps=20):
        fn()
        torch.cuda.synchronize()
        start, end = torch.cuda.Event(True), torch.cuda.Event(True)
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end) / reps

    if attempt("1B QKV shape 8192x2048x3072 e4m3 -> bf16",
               lambda: torch._scaled_mm(x8, y8, scale_a=one, scale_b=one,
                                        out_dtype=torch.bfloat16)):
        t8 = timed(lambda: torch._scaled_mm(x8, y8, scale_a=one, scale_b=one,
                                            out_dtype=torch.bfloat16))
        t8f = timed(lambda: torch._scaled_mm(x8, y8, scale_a=one, scale_b=one,
                                             out_dtype=torch.bfloat16,
                                             use_fast_accum=True))
        tb = timed(lambda: xb @ yb)
        flops = 2 * M * N * K
        print(f"timing: bf16 {tb:.3f} ms ({flops / tb / 1e9:.0f} TFLOP/s), "
              f"fp8 {t8:.3f} ms ({flops / t8 / 1e9:.0f}), "
              f"fp8 fast-accum {t8f:.3f} ms ({flops / t8f / 1e9:.0f})")
    print(f"fp8_torch_probe: {sum(results)} of {len(results)} small calls work")
    return 0 if results[0] else 1


if __name__ == "__main__":
    sys.exit(main())
