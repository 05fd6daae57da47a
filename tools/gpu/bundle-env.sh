# Sourced by the bundle's scripts (run.sh, nccl-suite.sh, step-table.sh):
# the environment the bundle's binaries run in on a GPU machine.
#
#   bundle_env BUNDLE [nccl]
#
# CUDA's libraries are the machine's own, shipped with PyTorch's wheels
# (the bundle carries none); with `nccl`, the bundle's NCCL comes first
# (the machine's, PyTorch's 2.28, cannot share a GPU between ranks). Open
# MPI is the bundle's (the PyPI wheel, relocated by OPAL_PREFIX), run as
# root.
bundle_env() {
  local bundle=$1 site libs="" d
  site=$(python3 -c "import sysconfig; print(sysconfig.get_paths()['purelib'])")
  for d in nvidia/cu13/lib nvidia/cublas/lib nvidia/nccl/lib nvidia/cudnn/lib \
           nvidia/cuda_runtime/lib; do
    [ "${2:-}" = nccl ] && [ "$d" = nvidia/nccl/lib ] && continue
    [ -d "$site/$d" ] && libs="$libs:$site/$d"
  done
  local first=""
  [ "${2:-}" = nccl ] && first="$bundle/lib/nccl:"
  export LD_LIBRARY_PATH="$first$bundle/openmpi/lib${libs}:${LD_LIBRARY_PATH:-}:$bundle/lib/fallback"
  export PATH="$bundle/openmpi/bin:$bundle/bin:$PATH"
  [ -x "$bundle/openmpi/bin/mpirun" ] && export OPAL_PREFIX=$bundle/openmpi
  export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
  # torchao for the FP8 PyTorch baseline (bench/torch_step.py).
  [ -d "$bundle/python" ] &&
    export PYTHONPATH="$bundle/python${PYTHONPATH:+:$PYTHONPATH}"
  return 0
}
